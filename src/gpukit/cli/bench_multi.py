"""`gpukit bench allreduce|allgather|reducescatter|broadcast|alltoall|p2p|scaling`: the multi-GPU benches.

`gpukit bench` hands its arguments here when the first one names one of these (:class:`MultiDispatch`, the one
hook in ``cli/bench.py``); everything else about them — options, tables, Markdown, saving — lives in this file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from gpukit.cli import render
from gpukit.cli.history import db_option, node_option

__all__ = ["MULTI_COMMANDS", "MultiDispatch", "run_multi"]

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
MULTI_COMMANDS = (*COLLECTIVES, "p2p", "scaling")

multi = typer.Typer(name="bench", add_completion=False, pretty_exceptions_enable=False,
                    context_settings={"help_option_names": ["-h", "--help"]})  # fmt: skip


class MultiDispatch(TyperCommand):
    """`gpukit bench`'s command class: ``gpukit bench allreduce …`` (or another multi-GPU bench) is run by this
    module's own commands; any other first argument is a workload of the ordinary bench."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] in MULTI_COMMANDS:
            ctx.meta["gpukit.multi_args"] = list(args)
            return []
        return super().parse_args(ctx, args)  # type: ignore[no-any-return]

    def invoke(self, ctx: Any) -> Any:
        args = ctx.meta.get("gpukit.multi_args")
        return run_multi(args) if args is not None else super().invoke(ctx)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        extra = f"Multi-GPU: gpukit bench {'|'.join(MULTI_COMMANDS)} --help (docs/multi-gpu.md)."
        self.epilog = f"{self.epilog}\n\n{extra}" if self.epilog else extra


def run_multi(args: list[str]) -> Any:
    command = typer.main.get_command(multi)
    return command.main(args=args, prog_name="gpukit bench", standalone_mode=False)


# ---- shared ----------------------------------------------------------------------------------------------------


def _command() -> str:
    return "gpukit " + " ".join(sys.argv[1:])


def _finish(run: Any, as_json: bool, markdown: Path | None, db: str | None, no_save: bool, table: Any,
            node: str | None = None) -> int:  # fmt: skip
    from gpukit.bench.collectives.launch import under_torchrun

    if under_torchrun():
        import os

        if os.environ.get("RANK") != "0":
            return 0  # one report per job: rank 0's
    if not no_save:
        from gpukit.bench.collectives.history import save_multi_run

        save_multi_run(run, db, _command(), node)
    if markdown:
        from gpukit.cli.bench_render import write_output

        write_output(markdown, _markdown(run))
    if as_json:
        render.print_json(run.to_dict())
    else:
        for t in table(run):
            render.console.print(t)
        for line in _reasons(run):
            render.console.print(line, soft_wrap=True)
        if run.failure:
            render.error(run.failure, hint="raise --timeout if the rank was only slow; its stderr is in the reason")
        if run.id is not None:
            render.console.print(f"saved as run {run.id} (gpukit report --run {run.id})", soft_wrap=True)
    return 1 if any(r.status == "failed" for r in run.rows) else 0


def _cells(run: Any) -> tuple[list[str], list[list[str]]]:
    if run.kind == "collectives":
        return _collective_cells(run)
    if run.kind == "p2p":
        return _p2p_cells(run)
    return _scaling_cells(run)


def _markdown(run: Any) -> str:
    cols, rows = _cells(run)
    lines = [f"# gpukit bench {run.kind} — {run.started_at}", "", f"`{_command()}`", ""]
    if run.failure:
        lines += [f"**failure:** {run.failure}", ""]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    lines += ([""] + [f"- {line.strip()}" for line in _reasons(run)]) if _reasons(run) else []
    return "\n".join(lines) + "\n"


def _status(r: Any) -> str:
    return "ok" if r.status == "ok" else r.status  # the reasons are listed under the table (_reasons)


def _reasons(run: Any) -> list[str]:
    seen: dict[str, int] = {}
    for r in run.rows:
        if r.status != "ok" and r.reason:
            key = f"{r.status}: {r.reason}"
            seen[key] = seen.get(key, 0) + 1
    return [f"  {k}" + (f" ({n} rows)" if n > 1 else "") for k, n in seen.items()]


# ---- collectives -----------------------------------------------------------------------------------------------


def _collective_cells(run: Any) -> tuple[list[str], list[list[str]]]:
    cols = ["op", "dtype", "size", "ranks", "graph", "time", "min … max", "algbw GB/s", "busbw GB/s", "status"]
    rows = []
    for r in run.rows:
        t = r.time_s or {}
        rows.append([r.op, r.dtype, render.fmt_bytes(r.size_bytes), str(r.ranks), r.graph,
                     render.fmt_seconds(t.get("median")),
                     f"{render.fmt_seconds(t.get('min'))} … {render.fmt_seconds(t.get('max'))}" if t else "",
                     render.fmt(r.algbw_gbps, ".3g"), render.fmt(r.busbw_gbps, ".3g"), _status(r)])  # fmt: skip
    return cols, rows


def _collective_tables(run: Any) -> list[Any]:
    cols, rows = _collective_cells(run)
    s = run.settings
    title = (f"{', '.join(s.get('ops', []))} on {s.get('ranks')} {s.get('device')} rank(s) — time per call, the "
             "slowest rank; busbw with NCCL's factors")  # fmt: skip
    return [render.table(cols, rows, title=title, justify="lllrlrrrrl")]


def _collective(op: str) -> Any:
    def command(
        device: str = typer.Option(None, "--device", "-d", help="cuda (NCCL) or cpu (gloo); default cuda if any."),
        ranks: int = typer.Option(None, "--ranks", "-r", help="Processes, one per GPU (default: every GPU; cpu 2)."),
        size: list[str] = typer.Option(None, "--size", "-s", help="Buffer sizes, e.g. 1KiB 64MiB 1GiB (repeat)."),
        dtype: list[str] = typer.Option(None, "--dtype", help="fp32 and/or bf16 (repeatable; default fp32)."),
        quick: bool = typer.Option(False, "--quick", help="Every 4th size, fewer samples."),
        repeat: int = typer.Option(None, "--repeat", "-n", min=1, help="Timed samples per row (default 20; 5)."),
        timeout: float = typer.Option(120.0, "--timeout", help="Seconds without progress before a rank is hung."),
        no_graph: bool = typer.Option(False, "--no-graph", help="Skip the CUDA-graph-captured rows."),
        as_json: bool = typer.Option(False, "--json", help="Print the run as JSON (docs/multi-gpu.md)."),
        markdown: Path = typer.Option(None, "--markdown", help="Also write the table as Markdown to this file."),
        db: str = db_option(),
        node: str = node_option(),
        no_save: bool = typer.Option(False, "--no-save", help="Do not record this run in the history."),
    ) -> int:
        from gpukit.bench.collectives.api import CollectiveRequest, parse_sizes, run_collectives

        dev = device or _default_device()
        req = CollectiveRequest((op,), dev, ranks, tuple(parse_sizes(size or [])), tuple(dtype or ["fp32"]), quick,
                                repeat, timeout, not no_graph)  # fmt: skip
        return _finish(run_collectives(req), as_json, markdown, db, no_save, _collective_tables, node)

    command.__doc__ = (f"Measure {op} through torch.distributed: time, algbw and busbw per size, every result "
                       "checked exactly; on CUDA also a captured CUDA graph of the loop.")  # fmt: skip
    return command


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


for _op in COLLECTIVES:
    multi.command(_op)(_collective(_op))


# ---- p2p -------------------------------------------------------------------------------------------------------


def _p2p_cells(run: Any) -> tuple[list[str], list[list[str]]]:
    cols = ["pair", "link", "mode", "peer access", "GB/s", "time", "latency", "check"]
    rows = []
    for r in run.rows:
        pair = "n/a" if r.src is None else f"{r.src} → {r.dst}"
        t = r.time_s or {}
        lat = render.fmt(r.latency_us, ".3g", "µs") if r.latency_us is not None else ""
        rows.append([pair, r.link or "n/a", r.mode, r.peer_access, render.fmt(r.gbps, ".4g"),
                     render.fmt_seconds(t.get("median")), lat, _status(r)])  # fmt: skip
    return cols, rows


def _p2p_tables(run: Any) -> list[Any]:
    from gpukit.bench.collectives.p2p import matrix

    cols, rows = _p2p_cells(run)
    out = [render.table(cols, rows, title="GPU → GPU copies (GB/s of bytes copied)", justify="lllllrrrl")]
    gpus, m = matrix(run.rows)
    if gpus:
        links = {(r.src, r.dst): r.link for r in run.rows}

        def cell(a: int, b: int, v: Any) -> str:
            return "—" if a == b else f"{render.fmt(v, '.0f')} ({links.get((a, b)) or 'n/a'})"

        cells = [[f"GPU {a}"] + [cell(a, b, v) for b, v in zip(gpus, row, strict=True)]
                 for a, row in zip(gpus, m, strict=True)]  # fmt: skip
        out.append(render.table(["src \\ dst", *[f"GPU {g}" for g in gpus]], cells,
                                title="one way, peer access on: GB/s (link)"))  # fmt: skip
    return out


@multi.command("p2p")
def p2p(
    size: str = typer.Option("256MiB", "--size", "-s", help="Bytes per copy."),
    repeat: int = typer.Option(10, "--repeat", "-n", min=1, help="Timed samples per row."),
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON (docs/multi-gpu.md)."),
    markdown: Path = typer.Option(None, "--markdown", help="Also write the table as Markdown to this file."),
    db: str = db_option(),
    node: str = node_option(),
    no_save: bool = typer.Option(False, "--no-save", help="Do not record this run in the history."),
) -> int:
    """Copy bandwidth and latency for every GPU pair, one way and both ways, peer access on and off, beside the
    link type (NVLink count or PCIe path)."""
    import time
    from datetime import UTC, datetime

    from gpukit.bench.collectives.api import parse_sizes
    from gpukit.bench.collectives.p2p import run_p2p
    from gpukit.bench.collectives.results import MultiRun

    (nbytes,) = parse_sizes([size])
    t0 = time.perf_counter()
    run = MultiRun("p2p", datetime.now(UTC).isoformat(timespec="seconds"), {"size_bytes": nbytes, "repeats": repeat})
    run.rows = run_p2p(nbytes, repeat)
    run.duration_s = time.perf_counter() - t0
    return _finish(run, as_json, markdown, db, no_save, _p2p_tables, node)


# ---- scaling ---------------------------------------------------------------------------------------------------


def _scaling_cells(run: Any) -> tuple[list[str], list[list[str]]]:
    cols = ["model", "ranks", "batch/rank", "images/s", "efficiency", "step", "check"]
    rows = []
    for r in run.rows:
        t = r.step_s or {}
        eff = f"{r.efficiency:.1%}" if r.efficiency is not None else "n/a"
        rows.append([r.model, str(r.ranks), str(r.batch_per_rank), render.fmt(r.images_per_s, ",.1f"), eff,
                     render.fmt_seconds(t.get("median")), _status(r)])  # fmt: skip
    return cols, rows


def _scaling_tables(run: Any) -> list[Any]:
    cols, rows = _scaling_cells(run)
    s = run.settings
    title = (f"DDP training, {s['model']} at {s['image_size']}px, {s['device']} — weak scaling (batch per rank "
             "fixed); efficiency = images/s ÷ (ranks × images/s on one)")  # fmt: skip
    return [render.table(cols, rows, title=title, justify="lrrrrrl")]


@multi.command("scaling")
def scaling(
    model: str = typer.Option("resnet50", "--model", "-m", help="resnet18 | resnet50 (seed-cnn: tiny, for tests)."),
    max_gpus: int = typer.Option(None, "--max-gpus", help="Largest rank count (default: every GPU; cpu 2)."),
    device: str = typer.Option(None, "--device", "-d", help="cuda (NCCL) or cpu (gloo); default cuda if any."),
    batch: int = typer.Option(None, "--batch", help="Images per rank per step (default 64 GPU, 8 CPU)."),
    image_size: int = typer.Option(None, "--image-size", help="Image side in pixels (default 224 GPU, 64 CPU)."),
    steps: int = typer.Option(None, "--steps", help="Timed steps per rank count (default 30 GPU, 6 CPU)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer timed steps."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds without progress before a rank is hung."),
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON (docs/multi-gpu.md)."),
    markdown: Path = typer.Option(None, "--markdown", help="Also write the table as Markdown to this file."),
    db: str = db_option(),
    node: str = node_option(),
    no_save: bool = typer.Option(False, "--no-save", help="Do not record this run in the history."),
) -> int:
    """DDP training with the trainer's own step on 1, 2, 4 … N ranks: images/s and scaling efficiency."""
    from gpukit.bench.collectives.scaling import ScalingRequest, run_scaling

    req = ScalingRequest(model, device or _default_device(), max_gpus, batch, image_size, steps, timeout, quick)
    return _finish(run_scaling(req), as_json, markdown, db, no_save, _scaling_tables, node)
