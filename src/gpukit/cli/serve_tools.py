"""`gpukit loadtest` and `gpukit deploy k8s`."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from gpukit.cli import render
from gpukit.cli.history import db_option
from gpukit.errors import ConfigError


def _loadtest_command(
    url: str = typer.Argument(..., help="e.g. http://127.0.0.1:8000/v1/predict (loopback, or a host named below)."),
    image: list[Path] = typer.Option(..., "--image", help="Image file or folder (repeatable); cycled through."),
    concurrency: int = typer.Option(64, "--concurrency", help="Connections (closed loop: clients)."),
    duration: float = typer.Option(30.0, "--duration", help="Measured seconds, after the warm-up."),
    warmup: float = typer.Option(1.0, "--warmup", help="Seconds sent but not measured."),
    rate: float | None = typer.Option(None, "--rate", help="Open loop: requests/s in all (default: closed loop)."),
    processes: int = typer.Option(0, "--processes", help="Generator processes (0: min(cores, concurrency, 8))."),
    max_requests: int = typer.Option(10_000_000, "--max-requests", help="Stop after this many requests."),
    timeout_s: float = typer.Option(30.0, "--timeout-s", help="A request unanswered by then counts as an error."),
    allow_host: list[str] = typer.Option([], "--allow-host", help="A non-loopback host you mean to load (repeatable)."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Send the key held in this env variable."),
    raw: bool = typer.Option(False, "--raw", help="Post the raw image bytes instead of multipart."),
    save: bool = typer.Option(False, "--save", help="Store the result in the history (for deploy --target-rps)."),
    db: str | None = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> int:
    """Load an inference server: throughput, p50/p90/p99/max, statuses, the server's own time split, generator CPU."""
    from gpukit.serve.loadtest import LoadSpec, collect_images, run_loadtest

    key = None
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(f"--api-key-env {api_key_env}: that environment variable is empty or unset")
    history = None
    if save:
        from gpukit.serve._store import open_history

        history = open_history(db)  # validated before any load is sent
    spec = LoadSpec(
        url=url,
        images=collect_images(image),
        concurrency=concurrency,
        duration_s=duration,
        warmup_s=warmup,
        rate=rate,
        processes=processes,
        max_requests=max_requests,
        timeout_s=timeout_s,
        allow_hosts=tuple(allow_host),
        api_key=key,
        raw=raw,
    )
    result = run_loadtest(spec)
    doc = result.to_dict()
    if history is not None:
        with history:
            doc["id"] = history.save_loadtest(result.to_dict())
    if as_json:
        render.print_json(doc)
        return 0
    _render_loadtest(doc)
    return 0


def _render_loadtest(r: dict) -> None:
    lat = r["latency_ms"]
    mode = f"open loop at {r['rate']:g} req/s" if r["mode"] == "open" else f"closed loop, {r['concurrency']} clients"
    rows = [
        ["throughput", f"{r['throughput_rps']:,.1f} req/s ({r['ok_rps']:,.1f} with 200)"],
        [
            "latency p50 / p90 / p99 / max",
            " / ".join(render.fmt(lat[k], ".1f") for k in ("p50", "p90", "p99", "max")) + " ms",
        ],
        [
            "requests measured / sent",
            f"{r['requests']:,} / {r['sent']:,}"
            + (f", {r['missed']:,} missed (generator fell behind)" if r["missed"] else ""),
        ],
        [
            "statuses",
            ", ".join(f"{k}: {v:,}" for k, v in r["statuses"].items())
            + ("  (0 = connection error/timeout)" if "0" in r["statuses"] else ""),
        ],
        [
            "server time, mean per request",
            ", ".join(f"{k} {v:.2f} ms" for k, v in r["server_timing_mean_ms"].items()) or render.NA,
        ],
        [
            "generator CPU",
            f"{r['generator_cpu_s']:.1f} s on {r['processes']} processes; per process "
            + ", ".join(f"{100 * s:.0f}%" for s in r["generator_cpu_per_process"])
            + " of a core",
        ],
    ]
    render.console.print(render.table(["", ""], rows, title=f"{r['url']}  ({mode}, {r['duration_s']:.1f} s)"))
    if r["generator_saturated"]:
        render.err_console.print(
            "warning: a generator process was near 100% of a core: add --processes, or the "
            "figures may measure the generator rather than the server"
        )
    for e in r["errors"]:
        render.err_console.print(f"error seen: {e}")
    if "id" in r:
        render.err_console.print(f"saved as load test {r['id']}")


def _k8s_command(
    model: Path = typer.Argument(..., help="A run folder of `gpukit train`, or a checkpoint's .json / .safetensors."),
    image: str = typer.Option(..., "--image", help="The container image to build and run (registry/name:tag)."),
    out: Path = typer.Option(..., "--out", help="Folder to write the manifests, Dockerfile and README into."),
    name: str = typer.Option("gpukit-serve", "--name", help="Name of the Deployment, Service and autoscaler."),
    namespace: str | None = typer.Option(None, "--namespace", help="Namespace (default: kubectl's)."),
    gpus: int = typer.Option(1, "--gpus", help="nvidia.com/gpu per pod (0: CPU pods)."),
    min_replicas: int | None = typer.Option(None, "--min", help="Fewest replicas (default 1)."),
    max_replicas: int | None = typer.Option(None, "--max", help="Most replicas (default 8)."),
    target_queue: int = typer.Option(32, "--target-queue", help="Mean queue depth per pod the autoscaler aims for."),
    target_rps: float | None = typer.Option(None, "--target-rps", help="Size --min/--max from a stored load test."),
    p99_ms: float = typer.Option(100.0, "--p99-ms", help="With --target-rps: the p99 a replica must keep."),
    workers: int = typer.Option(4, "--workers", help="HTTP processes per pod."),
    prometheus_url: str = typer.Option(
        "http://prometheus-server.monitoring.svc.cluster.local:80",
        "--prometheus-url",
        help="Prometheus for the KEDA trigger.",
    ),
    db: str | None = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> int:
    """Write Kubernetes manifests (Deployment, Service, HPA, KEDA ScaledObject), a Dockerfile and a README."""
    from gpukit.serve.deploy import DeploySpec, size_from_loadtests, write_deploy

    sizing = None
    if target_rps is not None:
        if target_rps <= 0:
            raise ConfigError("--target-rps must be positive")
        from gpukit.serve._store import open_history
        from gpukit.serve.model import model_info

        with open_history(db, create=False) as history:
            rows = history.loadtests()
        sizing = size_from_loadtests(rows, target_rps, p99_ms, model_info(model).model)
    lo = min_replicas if min_replicas is not None else (sizing["min_replicas"] if sizing else 1)
    hi = max_replicas if max_replicas is not None else (max(lo, sizing["max_replicas"]) if sizing else max(lo, 8))
    spec = DeploySpec(
        model=model,
        image=image,
        out=out,
        name=name,
        namespace=namespace,
        gpus=gpus,
        min_replicas=lo,
        max_replicas=hi,
        target_queue=target_queue,
        workers=workers,
        prometheus_url=prometheus_url,
    )
    result = write_deploy(spec, sizing)
    if as_json:
        render.print_json(result)
        return 0
    render.console.print(f"wrote {', '.join(result.files)} to {result.out}")
    render.console.print(
        f"replicas {result.min_replicas}–{result.max_replicas}"
        + (
            f" (sized from load test {sizing['loadtest_id']}: {sizing['per_replica_rps']:,.0f} req/s per replica)"
            if sizing
            else ""
        )
    )
    render.console.print(f"next: docker build -t {image} {out} && kubectl apply -f {out}")
    return 0


def register_tools(app: typer.Typer) -> None:
    app.command("loadtest")(_loadtest_command)
    deploy = typer.Typer(help="Write what a cluster needs to run and scale `gpukit serve`.", no_args_is_help=True)
    deploy.command("k8s")(_k8s_command)
    app.add_typer(deploy, name="deploy")
