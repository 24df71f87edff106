"""A whole `gpukit bench` run: plan workload × implementation × size, measure ceilings, measure each, finalize."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gpukit.bench.backends import BACKENDS, get_backend
from gpukit.bench.harness import Progress, Settings, finalize, now_iso, prepare, run_one
from gpukit.bench.results import Result, Run
from gpukit.bench.workloads import DEFAULT_WORKLOADS, get_workload
from gpukit.bench.workloads.base import Size, Workload
from gpukit.errors import ConfigError

__all__ = ["plan", "run_all", "versions"]

DEVICES = ("cpu", "cuda", "all")


def resolve_workloads(workloads: Sequence[str | Workload] | str | Workload | None) -> list[Workload]:
    if workloads is None:
        return [get_workload(n) for n in DEFAULT_WORKLOADS]
    if isinstance(workloads, str | Workload):
        workloads = [workloads]
    return [w if isinstance(w, Workload) else get_workload(w) for w in workloads]


def _backend_device(name: str) -> str:
    try:
        return get_backend(name).device
    except Exception:
        return "cpu"


def plan(
    workloads: list[Workload],
    backends: Sequence[str] | None,
    device: str,
    sizes: Sequence[str] | None,
    quick: bool,
) -> list[tuple[Workload, str, Size]]:
    """Every (workload, implementation name, size) to measure, in order: per workload and size, CPU first.

    ``backends`` entries match a backend name (all its implementations) or an implementation name exactly.
    """
    if device not in DEVICES:
        raise ConfigError(f"unknown device '{device}'", hint="use --device cpu, cuda or all")
    wanted = set(backends or [])
    known = set(BACKENDS) | {name for w in workloads for name in w.implementations}
    if unknown := sorted(wanted - known):
        raise ConfigError(f"unknown backend {', '.join(unknown)}", hint=f"known: {', '.join(sorted(known))}")
    items: list[tuple[Workload, str, Size]] = []
    for w in workloads:
        try:
            size_list = [w.parse_size(s) for s in sizes] if sizes else w.sizes(quick)
        except ConfigError as exc:  # with several workloads, say which one refused the size
            raise ConfigError(f"{w.name}: {exc.message}", hint=exc.hint) from exc
        names = [
            n
            for n, impl in w.implementations.items()
            if (not wanted or n in wanted or impl.backend in wanted)
            and (device == "all" or _backend_device(impl.backend) == device)
        ]
        names.sort(key=lambda n: _backend_device(w.implementations[n].backend) != "cpu")
        items += [(w, n, s) for s in size_list for n in names]
    return items


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
    try:
        from gpukit.hardware import machine_fingerprint

        return dict(machine_fingerprint())
    except Exception as exc:  # the history still records what it can
        return {"hostname": platform.node(), "cpu_count": os.cpu_count(), "error": str(exc)}


def run_all(
    workloads: Sequence[str | Workload] | str | Workload | None = None,
    *,
    backends: Sequence[str] | None = None,
    device: str = "all",
    sizes: Sequence[str] | None = None,
    quick: bool = False,
    repeat: int | None = None,
    energy: bool = False,
    measure_ceilings: bool = True,
    seed: int | None = None,
    budget_s: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    deadline: tuple[float, str] | None = None,
) -> Run:
    """See :func:`gpukit.bench.run`. ``deadline`` is (a ``time.perf_counter()`` instant, a reason): results not
    started by then become ``skipped`` rows with that reason (a sweep's total time budget)."""
    budget_s = budget_s or (10.0 if quick else 30.0)
    wl = resolve_workloads(workloads)
    items = plan(wl, backends, device, sizes, quick)
    settings = Settings(
        repeats=repeat or (5 if quick else 10),
        warmup=1 if quick else 2,
        budget_s=budget_s,
        energy=energy,
        slow_repeats=3 if quick and not repeat else None,
    )
    seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
    run = Run(
        started_at=now_iso(),
        machine=_fingerprint(),
        versions=versions(),
        settings={
            "workloads": [w.name for w in wl],
            "backends": list(backends or []),
            "device": device,
            "sizes": list(sizes or []),
            "quick": quick,
            "repeats": settings.repeats,
            "warmup": settings.warmup,
            **({"slow_repeats": settings.slow_repeats} if settings.slow_repeats else {}),
            "budget_s": budget_s,
            "energy": energy,
            "seed": seed,
        },
    )
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    try:
        if measure_ceilings:
            from gpukit.bench.ceilings import measure_ceilings as _measure_ceilings

            devices = {_backend_device(w.implementations[n].backend) for w, n, _ in items}
            run.ceilings = _measure_ceilings(quick=quick, cuda="cuda" in devices or device == "cuda")
        _measure_all(items, settings, rng, run.results, progress, deadline)
    except KeyboardInterrupt:
        run.interrupted = True
    finalize(run.results, run.ceilings, {w.name: w.ceiling for w in wl})
    run.duration_s = time.perf_counter() - t0
    return run


def _out_of_time(w: Workload, name: str, size: Size, reason: str) -> Result:
    device = _backend_device(w.implementations[name].backend)
    return Result(
        workload=w.name,
        backend=name,
        device=device,
        size=size.label,
        status="skipped",
        reason=reason,
        hint="raise --sweep-budget, or sweep fewer workloads",
        dtype=w.dtype_of(size),
    )


def _measure_all(
    items: list[tuple[Workload, str, Size]],
    settings: Settings,
    rng: np.random.Generator,
    results: list[Result],
    progress: Callable[[Progress], None] | None,
    deadline: tuple[float, str] | None = None,
) -> None:
    cache: dict[tuple[str, str], Any] = {}
    for i, (w, name, size) in enumerate(items):
        if progress is not None:
            progress(Progress(i, len(items), w.name, name, size.label))
        if deadline is not None and time.perf_counter() >= deadline[0]:
            results.append(_out_of_time(w, name, size, deadline[1]))
            continue
        key = (w.name, size.label)
        # Inputs and reference are built once per workload × size, only when some implementation runs.
        for old in [k for k in cache if k != key]:
            del cache[old]  # keep one size's (possibly GiB-sized) inputs alive at a time

        def _prep(w: Workload = w, size: Size = size, key: tuple[str, str] = key) -> Any:
            if key not in cache:
                cache[key] = prepare(w, size, rng)
            return cache[key]

        results.append(run_one(w, name, size, _prep, settings))
