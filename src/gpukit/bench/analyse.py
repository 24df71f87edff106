"""The *analyse* step of the engine: one pass over a finished run's rows, the same for a plain bench, a sweep and
a report — plausibility, speedups, % of ceiling (with each workload's own hook) and what a figure above its
ceiling means.

Plausibility (MEASURING.md rule 7): a figure the hardware cannot reach is a failure, whatever the check said — a
kernel that did nothing, or work done where the clock does not see it, is the classic way to get one:

* a GPU row above the datasheet peak of its device (bandwidth, or dense FLOP/s of its dtype, from the one data
  file), by more than :data:`PEAK_MARGIN`. Bandwidth rows whose working set a cache could hold are judged only
  against :data:`CACHE_FACTOR` × the peak (no GPU cache is that much faster than its HBM);
* any memory row well above (:data:`MEASURED_FACTOR` ×) the ceiling measured the same way in the same run, when
  its working set is out of cache.

A figure above 100 % of its ceiling that is not impossible carries ``ceiling_note``, shown under the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads.base import Workload

__all__ = ["CACHE_BYTES", "analyse", "fmt_bytes"]

PEAK_MARGIN = 1.05  # datasheet peaks are rounded; clocks boost a little
CACHE_BYTES = 256 << 20  # a working set this large is out of every GPU L2 and nearly every CPU L3
CACHE_FACTOR = 10.0
MEASURED_FACTOR = 1.5


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def analyse(results: Sequence[Result], ceilings: Ceilings, workloads: Mapping[str, Workload]) -> None:
    """Judge and annotate ``results`` in place (``workloads``: the run's workloads by name, for their ceiling
    kind and ``annotate`` hook)."""
    for r in results:
        if r.ok and (why := implausible(r, ceilings)):
            _fail(r, why)
    _speedups(results)
    for r in results:
        if not r.ok or not r.call_s:
            continue
        if r.ceiling:
            value = getattr(ceilings, r.ceiling, None)
            c = (r.ceiling, value) if isinstance(value, int | float) and value else None
        else:
            w = workloads.get(r.workload)
            c = ceilings.for_device(r.device, (w.ceiling if w else None) or "")
        if c is not None and r.gbps is not None:
            r.ceiling, r.pct_of_ceiling = c[0], 100.0 * r.gbps / c[1]
    for w in workloads.values():
        if w.annotate is not None:
            w.annotate(results)
    for r in results:
        if r.ok and r.pct_of_ceiling is not None and r.pct_of_ceiling > 100.0:
            r.ceiling_note = _above_ceiling(r, ceilings)


def implausible(r: Result, ceilings: Ceilings) -> str | None:
    """Why ``r``'s figure cannot be right on this machine, or None."""
    ws = r.working_set_bytes
    in_cache = ws is not None and ws < CACHE_BYTES
    if r.device == "cuda" and r.gbps is not None and ceilings.spec_bandwidth_gbps:
        peak = ceilings.spec_bandwidth_gbps
        limit = peak * (CACHE_FACTOR if in_cache else PEAK_MARGIN)
        if r.gbps > limit:
            return f"impossible: {r.gbps:,.0f} GB/s > {peak:,.0f} GB/s datasheet peak of {ceilings.spec_name}"
    if r.device == "cuda" and r.tflops is not None and r.dtype:
        peak_t = ceilings.spec_tflops.get(str(r.dtype))
        if peak_t and r.tflops > peak_t * PEAK_MARGIN:
            return f"impossible: {r.tflops:,.1f} TFLOP/s > {peak_t:,.0f} TFLOP/s {r.dtype} datasheet peak"
    name = r.ceiling if r.ceiling else ("d2d_copy_gbps" if r.device == "cuda" else "cpu_mem_gbps")
    if r.gbps is not None and name.endswith("_pageable_gbps"):
        # A pageable copy is staged through pinned buffers over the same link: the pinned ceiling bounds it at any size.
        pinned_name = name.replace("_pageable_", "_pinned_")
        pinned = getattr(ceilings, pinned_name, None)
        if isinstance(pinned, int | float) and pinned and r.gbps > MEASURED_FACTOR * pinned:
            return (f"impossible: {r.gbps:,.0f} GB/s is {r.gbps / pinned:.1f}× the {pinned:,.0f} GB/s "
                    f"{pinned_name} measured in this run (a pageable copy goes through pinned memory)")  # fmt: skip
    if r.gbps is not None and not in_cache and ws is not None and _same_size_class(r, ceilings, name):
        value = getattr(ceilings, name, None)
        if isinstance(value, int | float) and value and r.gbps > MEASURED_FACTOR * value:
            return (f"impossible: {r.gbps:,.0f} GB/s is {r.gbps / value:.1f}× the {value:,.0f} GB/s {name} measured "
                    "in this run at the same size or smaller, out of cache")  # fmt: skip
    return None


def _same_size_class(r: Result, ceilings: Ceilings, name: str) -> bool:
    """Whether ``r`` was measured at its ceiling's size or larger (MEASURING.md rule 8): a smaller copy can beat a
    ceiling measured larger for real (a CPU's L3, page-locking of small pageable buffers), so only the datasheet
    peak judges it. A ceiling with no recorded size (an older run) judges every row."""
    at = ceilings.measured_x.get(name)
    return at is None or r.size_x is None or r.size_x >= at


def _fail(r: Result, why: str) -> None:
    from gpukit.bench.harness import _skip  # the one way a row loses its figures

    _skip(r, "failed", why, "a kernel that did no work, or work done outside the timed calls, looks like this")


def _above_ceiling(r: Result, ceilings: Ceilings) -> str:
    pct = r.pct_of_ceiling or 0.0
    at = ceilings.measured_at.get(r.ceiling or "")
    if r.working_set_bytes is not None and r.working_set_bytes < CACHE_BYTES:
        where = f" at {at}" if at else ""
        return (f"{pct:.0f} %: its {fmt_bytes(r.working_set_bytes)} working set fits in cache; the ceiling was "
                f"measured out of cache{where}")  # fmt: skip
    if not _same_size_class(r, ceilings, r.ceiling or ""):
        return (f"{pct:.0f} %: measured at {r.size}, its ceiling at {at}: copies of this kind run faster at smaller "
                "sizes (caches; page-locking of small pageable buffers)")  # fmt: skip
    if r.ceiling and r.ceiling.startswith("gemm_"):
        return f"{pct:.0f} %: faster than cuBLAS in the same run (the ceiling is the vendor library's rate)"
    if r.ceiling in ("d2d_copy_gbps", "cpu_mem_gbps") and r.workload != "bandwidth":
        return (f"{pct:.0f} %: the ceiling is a copy (one read, one write per byte); {r.workload} moves another "
                "mix of reads and writes, which streams a few per cent faster")  # fmt: skip
    return f"{pct:.0f} %: within the run-to-run spread of the ceiling (its fastest sample; this row's median)"


def _speedups(results: Sequence[Result]) -> None:
    """Speedups over the best CPU result of the same workload and size (per call from Python: ``Result.call_s``)."""
    best_cpu: dict[tuple[str, str], tuple[float, float]] = {}
    for r in results:
        if r.ok and r.device == "cpu" and r.call_s:
            key = (r.workload, r.size)
            k0, e0 = best_cpu.get(key, (math.inf, math.inf))
            best_cpu[key] = (min(k0, r.call_s), min(e0, r.end_to_end_s or math.inf))
    for r in results:
        if not r.ok or not r.call_s or (r.workload, r.size) not in best_cpu:
            continue
        k0, e0 = best_cpu[(r.workload, r.size)]
        r.speedup = k0 / r.call_s
        r.speedup_e2e = e0 / r.end_to_end_s if r.end_to_end_s and math.isfinite(e0) else None
