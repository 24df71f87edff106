"""`gpukit serve`, `gpukit loadtest`, `gpukit deploy k8s`: the trained model behind HTTP, measured, scaled out."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpukit.cli import render
from gpukit.cli.engine import check_engine, engine_lines, engine_option, gate_option
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.serve.server import Stopped

_SERVE_EXTRA = "pip install 'gpukit[serve,torch]'"


def _need(*modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"gpukit serve needs {', '.join(missing)}, which is not installed", hint=_SERVE_EXTRA)


def _serve_command(
    model: Path = typer.Argument(..., help="A run folder of `gpukit train`, or a checkpoint's .json / .safetensors."),
    device: str = typer.Option("auto", "--device", help="cpu, cuda or auto."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0 for every interface)."),
    port: int = typer.Option(8000, "--port", help="Port (0 picks a free one)."),
    workers: int = typer.Option(
        0,
        "--workers",
        help="HTTP front-end processes feeding the one model process; 1: HTTP and model in one process; 0: on CUDA"
        " one per two CPUs (at most 8), 1 on a CPU.",
    ),
    max_batch: int = typer.Option(64, "--max-batch", help="Most images per forward pass."),
    max_wait_ms: float = typer.Option(2.0, "--max-wait-ms", help="Longest a request waits for its batch to fill."),
    queue_size: int = typer.Option(1024, "--queue-size", help="Requests admitted at once; more get 503."),
    timeout_s: float = typer.Option(10.0, "--timeout-s", help="A request not answered by then gets 504."),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Require the key held in this env variable."),
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", help="Larger bodies get 413."),
    max_pixels: int = typer.Option(16_777_216, "--max-pixels", help="Images with more pixels get 413."),
    decode_memory_mb: float = typer.Option(
        512.0, "--decode-memory-mb", help="Decoded pixels held at once per HTTP process (one request: half)."
    ),
    decode_threads: int = typer.Option(
        0, "--decode-threads", help="Threads decoding images with Pillow per HTTP process (0: from the CPU count)."
    ),
    amp: str = typer.Option("off", "--amp", help="off (the same numbers as `gpukit predict`) or bf16 (CUDA)."),
    cuda_graphs: bool = typer.Option(True, "--cuda-graphs/--no-cuda-graphs", help="One CUDA graph per batch size."),
    decode: str = typer.Option(
        "auto",
        "--decode",
        help="Where JPEGs are decoded: pil (HTTP processes), or per batch in the model process: nvimgcodec (hybrid"
        " host/GPU), nvimgcodec-hw (the GPU's JPEG engines), nvjpeg (torchvision); auto: nvjpeg on CUDA (pil for a"
        " model input of at most 64 px), pil on a CPU.",
    ),
    engine: str | None = engine_option(),
    gate_images: Path | None = gate_option(),
    model_cpus: int = typer.Option(
        0,
        "--model-cpus",
        help="CPUs the model process keeps to itself, the HTTP workers taking the others (--workers 2 or more; 4"
        " helped ResNet-50 on a busy host); 0: the system places them.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No once-a-second throughput line."),
) -> int:
    """Serve the trained model over HTTP: POST /v1/predict, /metrics, /docs, an upload page at /."""
    _need("fastapi", "uvicorn", "prometheus_client", "torch")
    from gpukit.serve.cuda_env import set_cuda_queues

    set_cuda_queues(device)  # before anything below starts CUDA in this process (the model process)
    from gpukit.serve.config import ServeConfig, resolve_auto
    from gpukit.serve.server import Started, Tick, run

    config = ServeConfig(
        model=model,
        device=device,
        host=host,
        port=port,
        workers=workers,
        max_batch=max_batch,
        max_wait_ms=max_wait_ms,
        queue_size=queue_size,
        timeout_s=timeout_s,
        api_key_env=api_key_env,
        max_body_mb=max_body_mb,
        max_pixels=max_pixels,
        decode_memory_mb=decode_memory_mb,
        decode_threads=decode_threads,
        amp=amp,
        cuda_graphs=cuda_graphs,
        decode=decode,
        engine=engine,
        gate_images=gate_images,
        model_cpus=model_cpus,
    )
    config = resolve_auto(config.validate())  # a decoder that is not installed fails here, before any process
    from gpukit.serve.model import model_info

    model_info(model)  # a bad path fails here, before any process starts
    check_engine(engine, device, gate_images)  # and an engine that cannot run here

    def started(s: Started) -> None:
        out = render.err_console
        out.print(f"serving {s.url}  (docs {s.url}/docs, metrics {s.url}/metrics)", soft_wrap=True, markup=False)
        out.print(
            f"model {s.model} {s.image_size}×{s.image_size}, classes {', '.join(s.classes)}; device {s.device}"
            f"{f', warmed in {s.warmup_s:.2f} s' if s.warmup_s else ''}",
            soft_wrap=True,
            markup=False,  # class names are the user's own text: "[bold]b" must print as it is
        )
        for line in engine_lines(s.engine) if s.engine else []:
            out.print(line, soft_wrap=True, markup=False)
        out.print(
            f"batching: max {s.max_batch}, wait {s.max_wait_ms:g} ms, queue {s.queue_size}; "
            f"HTTP processes {s.workers}; decode {s.decode}; API key {s.api_key}" + (f"; {s.cpus}" if s.cpus else ""),
            soft_wrap=True,
            markup=False,
        )
        if s.api_key == "off" and not _loopback(host):
            out.print(
                f"warning: listening on {host} without an API key: anyone who can reach this port can use the model"
                " (add --api-key-env NAME)",
                soft_wrap=True,
                markup=False,
            )

    def tick(t: Tick) -> None:
        if t.images_per_s == 0 and t.queue_depth == 0:
            return  # idle: no line
        render.err_console.print(
            f"{time.strftime('%H:%M:%S')}  {t.images_per_s:8,.0f} img/s  "
            f"{t.batches_per_s:6,.0f} batches/s (mean {t.mean_batch:5.1f})  "
            f"queue {t.queue_depth:4d}  expired {t.expired}",
            soft_wrap=True,
        )

    def notice(message: str) -> None:
        render.err_console.print(f"warning: {message}", soft_wrap=True, markup=False)

    end = run(config, started, None if quiet else tick, notice)
    render.err_console.print(_summary(end), soft_wrap=True, markup=False)
    return 0


def _loopback(host: str) -> bool:
    import ipaddress

    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _summary(end: Stopped) -> str:
    where = f" ({end.processes} HTTP processes)" if end.processes > 1 else ""
    return (
        f"stopped{where}: {end.admitted} requests admitted, {end.answered} answered ({end.answered_ok} with 200), "
        f"{end.cancelled} left by their clients; {end.connections} connections, {end.drained} idle ones closed "
        f"by the drain, {end.header_refused} refused before their headers were complete"
    )


def register(app: typer.Typer) -> None:
    """Add `serve`, `loadtest` and `deploy`."""
    from gpukit.cli.serve_tools import register_tools

    app.command("serve")(_serve_command)
    register_tools(app)
