"""`gpukit bench allreduce|allgather|reducescatter|broadcast|alltoall|p2p|scaling`: the multi-GPU benches.

They are `gpukit bench` requests like any other: `gpukit bench` sees one of these names as its workload, builds
the request here (:func:`multi_request`: ``CollectiveRequest``, ``P2PRequest`` or ``ScalingRequest``), runs it
through ``runner.execute`` into a :class:`~gpukit.bench.results.Run` of typed rows, saves it with the bench's own
history save, and renders it with the tables below.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpukit.cli import render

__all__ = ["MULTI_COMMANDS", "MultiOptions", "multi_request", "run_multi"]

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
MULTI_COMMANDS = (*COLLECTIVES, "p2p", "scaling")


@dataclass(frozen=True)
class MultiOptions:
    """The `gpukit bench` flags a multi-GPU bench reads (None: its own default)."""

    device: str | None = None
    sizes: tuple[str, ...] = ()
    repeat: int | None = None
    quick: bool = False
    ranks: int | None = None
    dtypes: tuple[str, ...] = ()
    timeout_s: float | None = None
    graph: bool = True
    model: str | None = None
    max_gpus: int | None = None
    batch: int | None = None
    image_size: int | None = None
    steps: int | None = None


def multi_request(name: str, o: MultiOptions) -> Any:
    """The request of multi-GPU bench ``name`` from the flags (ConfigError for a flag it does not take)."""
    from gpukit.errors import ConfigError

    device = o.device if o.device not in (None, "all") else _default_device()
    if name in COLLECTIVES:
        from gpukit.bench.collectives.api import DEFAULT_TIMEOUT_S, CollectiveRequest, parse_sizes

        _refuse(name, {"--model": o.model, "--max-gpus": o.max_gpus, "--batch": o.batch,
                       "--image-size": o.image_size, "--steps": o.steps})  # fmt: skip
        timeout = DEFAULT_TIMEOUT_S if o.timeout_s is None else o.timeout_s
        return CollectiveRequest((name,), device, o.ranks, tuple(parse_sizes(list(o.sizes))), o.dtypes or ("fp32",),
                                 o.quick, o.repeat, timeout, o.graph)  # fmt: skip
    if name == "p2p":
        from gpukit.bench.collectives.api import parse_sizes
        from gpukit.bench.collectives.p2p import DEFAULT_P2P_BYTES, P2PRequest

        _refuse(name, {"--ranks": o.ranks, "--dtype": o.dtypes, "--timeout": o.timeout_s is not None,
                       "--model": o.model, "--max-gpus": o.max_gpus, "--batch": o.batch,
                       "--image-size": o.image_size, "--steps": o.steps})  # fmt: skip
        if len(o.sizes) > 1:
            raise ConfigError("bench p2p takes one --size", hint="e.g. --size 256MiB")
        nbytes = parse_sizes(list(o.sizes))[0] if o.sizes else DEFAULT_P2P_BYTES
        return P2PRequest(nbytes, o.repeat or 10)
    from gpukit.bench.collectives.scaling import ScalingRequest

    _refuse(name, {"--size": o.sizes, "--ranks": o.ranks, "--dtype": o.dtypes, "--repeat": o.repeat})
    return ScalingRequest(o.model or "resnet50", device, o.max_gpus, o.batch, o.image_size, o.steps,
                          300.0 if o.timeout_s is None else o.timeout_s, o.quick)  # fmt: skip


def _refuse(name: str, given: dict[str, Any]) -> None:
    from gpukit.errors import ConfigError

    if unused := [flag for flag, value in given.items() if value]:
        raise ConfigError(f"bench {name} does not take {', '.join(unused)}", hint="see: gpukit bench --help")


def run_multi(name: str, options: MultiOptions, as_json: bool, markdown: Path | None, db: str | None,
              no_save: bool, node: str | None = None) -> int:  # fmt: skip
    """`gpukit bench NAME …` for a multi-GPU bench: request → runner.execute → save (under ``node``) → tables."""
    from gpukit.bench.runner import execute

    request = multi_request(name, options)
    table = _collective_tables if name in COLLECTIVES else _p2p_tables if name == "p2p" else _scaling_tables
    return _finish(execute(request), as_json, markdown, db, no_save, table, node)


# ---- shared ----------------------------------------------------------------------------------------------------


def _command() -> str:
    return "gpukit " + " ".join(sys.argv[1:])


def _finish(run: Any, as_json: bool, markdown: Path | None, db: str | None, no_save: bool, table: Any,
            node: str | None = None) -> int:  # fmt: skip
    """Save, print and judge a multi-GPU bench's :class:`~gpukit.bench.results.Run`, as `gpukit bench` does its own
    (the same history save under ``node``, the fallback file included)."""
    from gpukit.bench.collectives.launch import under_torchrun
    from gpukit.bench.collectives.results import multi_doc, rows_of

    if under_torchrun():
        import os

        if os.environ.get("RANK") != "0":
            return 0  # one report per job: rank 0's
    run.settings["command"] = _command()
    if not no_save:
        from gpukit.cli.bench import _save
        from gpukit.history import open_history

        with open_history(db, node=node) as history:
            _save(history, run)
    if markdown:
        from gpukit.cli.bench_render import write_output

        write_output(markdown, _markdown(run))
    failure = run.settings.get("failure")
    if as_json:
        render.print_json(multi_doc(run))
    else:
        for t in table(run):
            render.console.print(t)
        for line in _reasons(run):
            render.console.print(line, soft_wrap=True)
        if failure:
            render.error(failure, hint="raise --timeout if the rank was only slow; its stderr is in the reason")
        if run.id is not None:
            render.console.print(f"saved as run {run.id} (gpukit report --run {run.id})", soft_wrap=True)
    if not no_save and run.id is None:  # the store refused the run (kept in a file, said above): exit 2, as bench
        return 2
    return 1 if any(r.status == "failed" for r in rows_of(run)) else 0


def _rows(run: Any) -> list[Any]:
    from gpukit.bench.collectives.results import rows_of

    return rows_of(run)


def _cells(run: Any) -> tuple[list[str], list[list[str]]]:
    kind = run.settings.get("kind")
    if kind == "collectives":
        return _collective_cells(run)
    if kind == "p2p":
        return _p2p_cells(run)
    return _scaling_cells(run)


def _markdown(run: Any) -> str:
    cols, rows = _cells(run)
    lines = [f"# gpukit bench {run.settings.get('kind')} — {run.started_at}", "", f"`{_command()}`", ""]
    if run.settings.get("failure"):
        lines += [f"**failure:** {run.settings['failure']}", ""]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    lines += ([""] + [f"- {line.strip()}" for line in _reasons(run)]) if _reasons(run) else []
    return "\n".join(lines) + "\n"


def _status(r: Any) -> str:
    return "ok" if r.status == "ok" else r.status  # the reasons are listed under the table (_reasons)


def _reasons(run: Any) -> list[str]:
    seen: dict[str, int] = {}
    for r in _rows(run):
        if r.status != "ok" and r.reason:
            key = f"{r.status}: {r.reason}"
            seen[key] = seen.get(key, 0) + 1
    return [f"  {k}" + (f" ({n} rows)" if n > 1 else "") for k, n in seen.items()]


# ---- collectives -----------------------------------------------------------------------------------------------


def _collective_cells(run: Any) -> tuple[list[str], list[list[str]]]:
    cols = ["op", "dtype", "size", "ranks", "graph", "time", "min … max", "algbw GB/s", "busbw GB/s", "status"]
    rows = []
    for r in _rows(run):
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


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


# ---- p2p -------------------------------------------------------------------------------------------------------


def _p2p_cells(run: Any) -> tuple[list[str], list[list[str]]]:
    cols = ["pair", "link", "mode", "peer access", "GB/s", "time", "latency", "check"]
    rows = []
    for r in _rows(run):
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
    gpus, m = matrix(_rows(run))
    if gpus:
        links = {(r.src, r.dst): r.link for r in _rows(run)}

        def cell(a: int, b: int, v: Any) -> str:
            return "—" if a == b else f"{render.fmt(v, '.0f')} ({links.get((a, b)) or 'n/a'})"

        cells = [[f"GPU {a}"] + [cell(a, b, v) for b, v in zip(gpus, row, strict=True)]
                 for a, row in zip(gpus, m, strict=True)]  # fmt: skip
        out.append(render.table(["src \\ dst", *[f"GPU {g}" for g in gpus]], cells,
                                title="one way, peer access on: GB/s (link)"))  # fmt: skip
    return out


# ---- scaling ---------------------------------------------------------------------------------------------------


def _scaling_cells(run: Any) -> tuple[list[str], list[list[str]]]:
    cols = ["model", "ranks", "batch/rank", "images/s", "efficiency", "step", "check"]
    rows = []
    for r in _rows(run):
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
