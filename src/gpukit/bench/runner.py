"""A whole `gpukit bench` run, top to bottom: request → **plan** (the rows to measure) → ceilings → **measure**
(the harness, one row at a time) → **analyse** (one pass: plausibility, speedups, % of ceiling, crossovers).

A plain bench and a sweep are the same path; a sweep only plans each workload's ladder and adds crossovers.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gpukit.bench.analyse import analyse
from gpukit.bench.backends import BACKENDS, get_backend
from gpukit.bench.harness import Prepared, Progress, Settings, base_row, cannot_run, prepare, run_one
from gpukit.bench.request import DEVICES, BenchRequest
from gpukit.bench.results import Result, Run
from gpukit.bench.workloads import DEFAULT_WORKLOADS, WORKLOADS, get_workload
from gpukit.bench.workloads.base import Size, Workload
from gpukit.errors import ConfigError

__all__ = ["MultiRequest", "Row", "execute", "hardware_state", "plan", "resolve_workloads", "versions"]


@dataclass(frozen=True)
class Row:
    """One thing to measure: a workload, one of its implementations, one size."""

    workload: Workload
    impl: str
    size: Size
    skip: str | None = None  # a reason known when planning (--quick's pure Python)

    @property
    def device(self) -> str:
        return _backend_device(self.workload.implementations[self.impl].backend)


def resolve_workloads(request: BenchRequest) -> list[Workload]:
    """The request's workloads as objects. A custom workload may not share a built-in's (or another one's) name:
    inputs, reference and ceiling kind would be mixed up between the two."""
    from gpukit.bench.sweep import SWEEP_WORKLOADS

    given = request.workloads or tuple(SWEEP_WORKLOADS if request.sweep else DEFAULT_WORKLOADS)
    out: list[Workload] = []
    for w in given:
        obj = w if isinstance(w, Workload) else get_workload(w)
        if isinstance(w, Workload) and w.name in WORKLOADS and get_workload(w.name) is not w:
            raise ConfigError(
                f"your workload is named '{w.name}', like gpukit's built-in one",
                hint="give it another name (Workload(name=...)); the two would share inputs and reference",
            )
        if any(o.name == obj.name and o is not obj for o in out):
            raise ConfigError(f"two different workloads are named '{obj.name}'", hint="give each its own name")
        if obj not in out:
            out.append(obj)
    return out


def _is_python(workload: Workload, impl: str) -> bool:
    return workload.implementations[impl].backend == "python"


def _backend_device(name: str) -> str:
    try:
        return get_backend(name).device
    except Exception:
        return "cpu"


def plan(workloads: list[Workload], request: BenchRequest) -> list[Row]:
    """Every row to measure, in order: per workload and size, CPU first. ``request.backends`` entries match a
    backend name (all its implementations) or an implementation name exactly. A sweep takes each workload's
    ladder (``sweep.SWEEP_SIZES``; its default sizes when it has none)."""
    from gpukit.bench.sweep import SWEEP_SIZES

    if request.device not in DEVICES:
        raise ConfigError(f"unknown device '{request.device}'", hint="use --device cpu, cuda or all")
    wanted = set(request.backends)
    known = set(BACKENDS) | {name for w in workloads for name in w.implementations}
    if unknown := sorted(wanted - known):
        raise ConfigError(f"unknown backend {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}")
    rows: list[Row] = []
    for w in workloads:
        labels = list(request.sizes) or (SWEEP_SIZES.get(w.name, []) if request.sweep else [])
        quick_default = request.quick and not labels
        try:
            size_list = [w.parse_size(s) for s in labels] if labels else w.sizes(request.quick)
        except ConfigError as exc:  # with several workloads, say which one refused the size
            raise ConfigError(f"{w.name}: {exc.message}", hint=exc.hint) from exc
        names = [
            n
            for n, impl in w.implementations.items()
            if (not wanted or n in wanted or impl.backend in wanted)
            and (request.device == "all" or _backend_device(impl.backend) == request.device)
        ]
        names.sort(key=lambda n: _backend_device(w.implementations[n].backend) != "cpu")
        skip = {n: QUICK_PYTHON_SKIP if quick_default and _left_out(w, n, wanted) else None for n in names}
        rows += [Row(w, n, s, skip[n]) for s in size_list for n in names]
    return rows


# --quick leaves pure Python out unless it is asked for: its rows took 10.8 s of an H200 host's 34 s run (the seed
# frame's Mandelbrot alone 5.3-6.9 s), and the speedups are taken against the best CPU backend, never pure Python
QUICK_PYTHON_SKIP = "--quick leaves pure Python out (speedups are taken against the best CPU backend)"


def _left_out(workload: Workload, impl: str, wanted: set[str]) -> bool:
    """A pure-Python row that --quick leaves out: not when --backend names it."""
    return _is_python(workload, impl) and not ({impl, "python"} & wanted)


def versions() -> dict[str, Any]:
    """Versions of Python, gpukit and each framework that is importable (without importing heavy ones twice)."""
    from importlib import metadata

    from gpukit import __version__

    out: dict[str, Any] = {"python": platform.python_version(), "gpukit": __version__}
    for dist in ("numpy", "numba", "numba-cuda", "torch", "triton", "cupy-cuda12x", "cupy-cuda13x", "cupy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _fingerprint() -> dict[str, Any]:
    """The machine and, per GPU, the state a comparison must match (``gpu_state``: serial, clocks, power limit,
    persistence and ECC mode; bench/verdict.py)."""
    try:
        from gpukit.hardware import machine_fingerprint
        from gpukit.hardware.state import gpu_states

        doc = dict(machine_fingerprint())
        if states := gpu_states():
            doc["gpu_state"] = states
        return doc
    except Exception as exc:  # the history still records what it can
        return {"hostname": platform.node(), "cpu_count": os.cpu_count(), "error": str(exc)}


def hardware_state() -> dict[str, Any]:
    """``{"machine": ..., "versions": ...}`` of this process, as a run records them (for comparisons made outside
    a run: the ``gpukit_bench`` fixture)."""
    return {"machine": _fingerprint(), "versions": versions()}


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class MultiRequest(Protocol):
    """A multi-GPU bench's request (``CollectiveRequest``, ``P2PRequest``, ``ScalingRequest`` in bench/collectives):
    it launches its own ranks and returns its typed rows as a :class:`Run`."""

    def run(self) -> Run: ...


def execute(request: BenchRequest | MultiRequest, progress: Callable[[Progress], None] | None = None) -> Run:
    """Run ``request``: the one path from a request to a finished :class:`Run` (a multi-GPU request measures
    itself, in its own processes). KeyboardInterrupt stops early and returns the rows measured so far with
    ``interrupted=True``."""
    if not isinstance(request, BenchRequest):
        return request.run()
    req = request.resolved()
    workloads = resolve_workloads(req)
    rows = plan(workloads, req)
    names = [w.name for w in workloads]
    run = Run(started_at=now_iso(), machine=_fingerprint(), versions=versions(), settings=req.to_dict(names))
    run.request = req
    t0 = time.perf_counter()
    cuda = req.device == "cuda" or any(r.device == "cuda" for r in rows)
    walls: dict[str, float] = {}
    try:
        if req.ceilings:
            from gpukit.bench.ceilings import measure_ceilings

            run.ceilings = measure_ceilings(quick=req.quick, cuda=cuda)
        deadline = None
        if req.sweep and req.sweep_total_s is not None:
            reason = f"sweep time budget of {req.sweep_total_s:g} s spent before this size started"
            deadline = (time.perf_counter() + req.sweep_total_s, reason)
        _measure_all(rows, req.settings(), np.random.default_rng(req.seed), run.results, progress, deadline, walls)
    except KeyboardInterrupt:
        run.interrupted = True
    if cuda and run.ceilings.spec_name is None:
        from gpukit.bench.ceilings import add_spec

        add_spec(run.ceilings)  # the datasheet peaks judge the figures even without measured ceilings
    analyse(run.results, run.ceilings, {w.name: w for w in workloads})
    run.duration_s = time.perf_counter() - t0
    if req.sweep:
        _sweep_settings(run, names, walls)
    return run


def _sweep_settings(run: Run, names: list[str], walls: dict[str, float]) -> None:
    from gpukit.bench.sweep import crossovers

    started = list(walls)
    run.settings.update(
        workload_s={n: round(s, 3) for n, s in walls.items()},
        missing_workloads=[n for n in names if n not in walls],
        partial_workloads=started[-1:] if run.interrupted else [],
        crossovers=[c.to_dict() for c in crossovers(run.results)],
    )
    if "gemm" in names:
        run.settings["gemm_check"] = "n ≥ 2048: the float64 reference and the check cover 256 evenly spaced rows of C"


def _not_measured(row: Row, reason: str, hint: str, cause: str) -> Result:
    """A row left unmeasured for ``reason`` — unless it could never have run here: then that is its reason (a GPU
    row on a machine without one is not the budget's doing)."""
    if (never := cannot_run(row.workload, row.impl, row.size)) is not None:
        return never
    r = base_row(row.workload, row.impl, row.size, row.device)
    r.status, r.reason, r.hint, r.skip_cause = "skipped", reason, hint, cause
    return r


def _planned_skip(row: Row) -> Result:
    """A row the plan left out (``Row.skip``), shown with its reason."""
    return _not_measured(row, row.skip or "", "run without --quick, or add --backend python", "quick")


def _out_of_time(row: Row, reason: str) -> Result:
    """A row the sweep had no time left for."""
    return _not_measured(row, reason, "raise --sweep-budget, or sweep fewer workloads", "sweep-budget")


def _measure_all(
    rows: Sequence[Row],
    settings: Settings,
    rng: np.random.Generator,
    results: list[Result],
    progress: Callable[[Progress], None] | None,
    deadline: tuple[float, str] | None,
    walls: dict[str, float],
) -> None:
    """Measure each row in order. Inputs and reference are built once per workload × size (keyed by the workload
    object, not its name), only when some implementation runs; one size's inputs are kept alive at a time."""
    cache: dict[tuple[int, str], Prepared] = {}
    t_last = time.perf_counter()
    current: str | None = None
    try:
        for i, row in enumerate(rows):
            now = time.perf_counter()
            if current is not None:
                walls[current] = walls.get(current, 0.0) + (now - t_last)
            t_last, current = now, row.workload.name
            walls.setdefault(current, 0.0)
            if progress is not None:
                progress(Progress(i, len(rows), row.workload.name, row.impl, row.size.label))
            if deadline is not None and time.perf_counter() >= deadline[0]:
                results.append(_out_of_time(row, deadline[1]))
                continue
            if row.skip is not None:
                results.append(_planned_skip(row))
                continue
            key = (id(row.workload), row.size.label)
            for old in [k for k in cache if k != key]:
                del cache[old]

            def _prep(row: Row = row, key: tuple[int, str] = key) -> Prepared:
                if key not in cache:
                    cache[key] = prepare(row.workload, row.size, rng)
                return cache[key]

            results.append(run_one(row.workload, row.impl, row.size, _prep, settings))
    finally:
        if current is not None:
            walls[current] = walls.get(current, 0.0) + (time.perf_counter() - t_last)
