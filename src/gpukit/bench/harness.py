"""Runs one workload × implementation × size into a verified :class:`Result`, and whole runs into a :class:`Run`.

Order per result (MEASURING.md): availability → fresh random inputs and the reference (shared by every
implementation of that size) → host→device transfer → poisoned output → first call (compile / JIT / first-call
time) → device→host transfer → check (a failed check is a ``failed`` row, never a time) → timed samples through
:func:`gpukit.bench.timing.measure` with rotated input buffers → throughput, % of ceiling, speedup.
Anything an implementation raises becomes a ``failed`` row with the reason; only KeyboardInterrupt stops a run.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpukit.bench.backends import get_backend
from gpukit.bench.backends.base import Backend
from gpukit.bench.results import THROUGHPUT_UNITS, Ceilings, Result
from gpukit.bench.timing import HostClock, choose_inner, measure
from gpukit.bench.workloads.base import Implementation, Size, Workload
from gpukit.errors import BackendUnavailable

__all__ = ["Progress", "Settings", "run_one"]

# Inputs smaller than this are rotated among several copies so a timed call does not find them in cache
# (H200 L2 is 50 MiB; server CPUs have up to a few hundred MiB of L3).
ROTATE_BELOW_BYTES = {"cuda": 256 << 20, "cpu": 256 << 20}
MAX_COPIES = 8
# Below this per-call time an event-timed sample is preceded by one untimed call (timing.measure's ``lead``), so the
# host's launch of the first timed call is hidden behind device work; above it a launch is < 0.5 % of the call.
LEAD_BELOW_S = 0.01
# A call slower than this is warm after the first call and the sizing call (no further warm-up calls), and under
# --quick takes Settings.slow_repeats samples: pure Python and NumPy Mandelbrot rows made up half of a 61 s --quick
# on an H200 host whose CPU side was slow (26 GB/s of memory bandwidth), against 34 s on another.
SLOW_CALL_S = 0.1
ENERGY_MIN_S = 1.0  # NVML's energy counter needs about a second of work to mean something


@dataclass(frozen=True)
class Progress:
    """Passed to the progress callback before each result: ``index`` of ``total``, and what is about to run."""

    index: int
    total: int
    workload: str
    backend: str
    size: str


@dataclass(frozen=True)
class Settings:
    """How one result is measured (the CLI flags map onto these one to one)."""

    repeats: int = 10
    warmup: int = 2
    budget_s: float = 30.0  # per result: estimate above it → skipped; samples stop once it is spent
    target_sample_s: float = 2e-3  # each sample lasts at least this long (back-to-back calls)
    energy: bool = False
    gpu_index: int = 0
    slow_repeats: int | None = None  # calls slower than SLOW_CALL_S take at most this many samples (--quick: 3)


@dataclass
class Prepared:
    """Host inputs and their reference for one workload × size, shared by every implementation."""

    inputs: dict[str, Any]
    ref: np.ndarray


def prepare(workload: Workload, size: Size, rng: np.random.Generator) -> Prepared:
    inputs = workload.make_inputs(size, rng)
    return Prepared(inputs=inputs, ref=workload.reference(size, inputs))


# What a row measured; a row that is not ok carries none of it (results.py: a failure is never a time).
_MEASURED_FIELDS = (
    *("compile_s", "h2d_s", "d2h_s", "kernel_median_s", "kernel_min_s", "kernel_max_s", "end_to_end_s", "energy_j"),
    "launch_s",
    *THROUGHPUT_UNITS,
)


def _skip(base: Result, status: str, reason: str, hint: str | None = None) -> Result:
    base.status, base.reason, base.hint = status, reason, hint
    for name in _MEASURED_FIELDS:  # set before the check (first call, transfers) or before a later exception
        setattr(base, name, None)
    base.samples_s, base.repeats = [], 0
    return base


def _reason(exc: BaseException) -> tuple[str, str | None]:
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    name = type(exc).__name__
    if "out of memory" in text.lower() or "OutOfMemory" in name:
        return f"out of memory: {text}", "try a smaller --size"
    return f"{name}: {text}" if text else name, getattr(exc, "hint", None)


def _array_bytes(inputs: Mapping[str, Any]) -> int:
    return sum(v.nbytes for v in inputs.values() if isinstance(v, np.ndarray))


def _to_device(impl: Implementation, backend: Backend, inputs: Mapping[str, Any], size: Size) -> dict[str, Any]:
    if impl.prepare is not None:
        return impl.prepare(inputs, size)
    return {k: backend.to_device(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}


def _telemetry(backend: Backend, index: int) -> Any:
    if backend.device != "cuda":
        return None
    try:
        from gpukit.hardware import telemetry

        return telemetry.sample(index)
    except Exception:  # telemetry is best effort; it never breaks a measurement
        return None


def run_one(
    workload: Workload,
    impl_name: str,
    size: Size,
    prepared: Prepared | Callable[[], Prepared],
    settings: Settings,
) -> Result:
    """Measure one implementation at one size. ``prepared`` may be a callable so inputs are only built when some
    implementation actually runs. Never raises except KeyboardInterrupt."""
    impl = workload.implementations[impl_name]
    base = Result(workload=workload.name, backend=impl_name, device="cpu", size=size.label)
    base.dtype = workload.dtype_of(size)
    base.throughput_unit = workload.unit
    try:
        backend = get_backend(impl.backend)
        base.device = backend.device
        avail = backend.availability()
    except Exception as exc:  # a broken backend module is that backend's problem only
        return _skip(base, "skipped", *_reason(exc))
    if not avail.ok:
        return _skip(base, "skipped", avail.reason or "not available", avail.hint)
    try:
        if impl.supports is not None and (why := impl.supports(size)):
            return _skip(base, "skipped", why)
        # Measuring takes at least 5 calls (first, sizing, 3 samples); refuse what would pass the budget.
        est = impl.estimate_s(size) if impl.estimate_s is not None else 0.0
    except Exception as exc:
        return _skip(base, "failed", *_reason(exc))
    if est * 5 > settings.budget_s:
        return _skip(
            base,
            "skipped",
            f"estimated {est:.3g} s per call (~{est * 5:.0f} s to measure) exceeds the "
            f"{settings.budget_s:.0f} s budget",
            "pick a smaller --size for this backend, or raise --budget",
        )
    try:
        return _measure(workload, impl, backend, size, prepared, settings, base)
    except KeyboardInterrupt:
        raise
    except BackendUnavailable as exc:  # a kernel module found its framework missing: skipped, with the hint
        return _skip(base, "skipped", exc.message, exc.hint)
    except Exception as exc:
        return _skip(base, "failed", *_reason(exc))
    finally:
        with contextlib.suppress(Exception):  # releasing cached memory is best effort
            backend.release()


def _measure(
    workload: Workload,
    impl: Implementation,
    backend: Backend,
    size: Size,
    prepared: Prepared | Callable[[], Prepared],
    settings: Settings,
    row: Result,
) -> Result:
    prep = prepared() if callable(prepared) else prepared
    shape, dtype = workload.output_spec(size)
    free = backend.free_memory_bytes()
    need = _array_bytes(prep.inputs) + int(np.prod(shape)) * np.dtype(dtype).itemsize
    if free is not None and need > 0.9 * free:
        return _skip(row, "skipped", f"needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free on the device")
    host_clock = HostClock(backend.synchronize)

    # Host→device: the inputs' first trip; the transfer clock syncs before reading the host clock.
    tclock = backend.transfer_clock()
    tclock.start()
    sets = [_to_device(impl, backend, prep.inputs, size)]
    row.h2d_s = tclock.stop() if backend.has_transfers else 0.0
    out = backend.poisoned(shape, dtype)

    # First call: JIT / compile / autotune plus one run, synchronized (reported apart, never as kernel time).
    host_clock.start()
    impl.fn(sets[0], out, size)
    row.compile_s = host_clock.stop()

    tclock.start()
    host_out = backend.to_host(out)
    row.d2h_s = tclock.stop() if backend.has_transfers else 0.0
    if impl.dtype is not None:  # the tolerance follows the precision the implementation computes in
        size = replace(size, params={**size.params, "compute_dtype": impl.dtype})
    ok, err = workload.check(host_out, prep.ref, size)
    row.check, row.error, row.tolerance = ok, err, workload.tolerance(size)
    if host_out.size <= 16:
        row.output_preview = host_out.ravel().tolist()
    if not ok:
        return _skip(row, "failed", f"check failed: relative error {err:.3g} (tolerance {row.tolerance})")
    del host_out

    # One more synchronized call estimates the per-call time, to size samples and respect the budget.
    host_clock.start()
    impl.fn(sets[0], out, size)
    one_s = max(host_clock.stop(), 1e-9)
    repeats = settings.repeats
    in_bytes = _array_bytes(prep.inputs)
    # Rotate small inputs among copies so timed calls do not find them in cache; a call slower than 50 ms
    # (pure Python) would not benefit and the copies would only cost memory and time.
    if 0 < in_bytes < ROTATE_BELOW_BYTES[backend.device] and impl.prepare is None and one_s < 0.05:
        copies = min(MAX_COPIES, math.ceil(ROTATE_BELOW_BYTES[backend.device] / in_bytes))
        sets += [_to_device(impl, backend, prep.inputs, size) for _ in range(copies - 1)]
    inner = choose_inner(one_s, settings.target_sample_s)
    slow = one_s > SLOW_CALL_S
    warmup = 0 if slow else settings.warmup  # a slow call is its own warm-up (two calls already ran)
    if slow and settings.slow_repeats:
        repeats = min(repeats, settings.slow_repeats)
    clock = backend.clock()
    queues_ahead = bool(getattr(clock, "queues_ahead", False))  # a backend's own clock may predate the attribute
    lead = 1 if queues_ahead and one_s < LEAD_BELOW_S else 0
    repeats = max(3, min(repeats, int(settings.budget_s / (one_s * (inner + lead))) or 3))
    # Energy: sample on until the timed calls make a second of device time (the per-call estimate above is a
    # host-timed call, launch and sync included, so counting samples from it fell short of the second).
    min_total_s = ENERGY_MIN_S * 1.05 if settings.energy and backend.device == "cuda" else 0.0

    pad = None
    if queues_ahead and not settings.energy:  # with --energy, a spin between samples would be billed to the kernel
        try:
            pad = backend.pad()
        except Exception:  # without a pad the lead call still hides most of a launch, and the row's launch_s
            pad = None  # shows whether the host, not the device, set the pace
    # A slow call timed by a host clock: the sizing call above was exactly one sample (one call, synchronized, the
    # same clock), so it is kept as the first one — pure-Python Mandelbrot then runs 4 calls, not 5, of ~1.5 s each.
    reuse = slow and inner == 1 and not queues_ahead and not settings.energy
    before = _telemetry(backend, settings.gpu_index)
    n = len(sets)
    samples = measure(
        lambda i: impl.fn(sets[i % n], out, size),
        clock,
        repeats=repeats - 1 if reuse else repeats,
        warmup=warmup,
        inner=inner,
        max_total_s=settings.budget_s,
        lead=lead,
        min_total_s=min_total_s,
        pad=pad,
    )
    after = _telemetry(backend, settings.gpu_index)
    if reuse:
        samples.times_s.insert(0, one_s)
    if queues_ahead and samples.issue_s:  # the host's side of each call: launch-bound when it exceeds the kernel
        row.launch_s = float(np.median(samples.issue_s))
    _record(row, workload, impl, size, prep.ref, samples.times_s, inner, before, after, samples.warmup, lead)
    return row


def _record(
    row: Result,
    workload: Workload,
    impl: Implementation,
    size: Size,
    ref: np.ndarray,
    times: list[float],
    inner: int,
    before: Any,
    after: Any,
    warmup: int = 0,
    lead: int = 0,
) -> None:
    t = sorted(times)
    row.samples_s = list(times)
    row.repeats, row.inner = len(times), inner
    row.kernel_median_s = float(np.median(t))
    row.kernel_min_s, row.kernel_max_s = t[0], t[-1]
    # A caller cannot issue calls faster than the host launches them: throughput and end to end use the slower of
    # device time and launch (Result.call_s); the kernel columns stay device time.
    per_call = row.call_s or row.kernel_median_s
    row.end_to_end_s = (row.h2d_s or 0.0) + per_call + (row.d2h_s or 0.0)
    row.flops, row.bytes = workload.flops(size), workload.bytes(size)
    scale = THROUGHPUT_UNITS[workload.unit][0]
    amount = (impl.amount or workload.amount)(size, ref)
    setattr(row, workload.unit, amount / per_call / scale)
    row.ceiling = impl.ceiling  # finalize() fills pct_of_ceiling; an explicit name here wins over the kind
    if before is not None or after is not None:
        row.telemetry = {
            "before": before.to_dict() if before is not None else None,
            "after": after.to_dict() if after is not None else None,
        }
        timed_s = sum(times) * inner
        e0 = getattr(before, "energy_j", None)
        e1 = getattr(after, "energy_j", None)
        if e0 is not None and e1 is not None and timed_s >= ENERGY_MIN_S:
            calls = len(times) * (inner + lead) + warmup  # the readings bracket the warm-up and lead calls too
            row.energy_j = (e1 - e0) / calls  # per call of the kernel


def finalize(results: Sequence[Result], ceilings: Ceilings, ceiling_kind: Mapping[str, str | None]) -> None:
    """Fill % of ceiling (against the ceiling measured in this run) and speedups over the best CPU result (per call
    from Python: ``Result.call_s``)."""
    best_cpu: dict[tuple[str, str], tuple[float, float]] = {}
    for r in results:
        if r.ok and r.device == "cpu" and r.call_s:
            key = (r.workload, r.size)
            k0, e0 = best_cpu.get(key, (math.inf, math.inf))
            best_cpu[key] = (min(k0, r.call_s), min(e0, r.end_to_end_s or math.inf))
    for r in results:
        if not r.ok or not r.call_s:
            continue
        if r.ceiling:
            value = getattr(ceilings, r.ceiling, None)
            c = (r.ceiling, value) if value else None
        else:
            c = ceilings.for_device(r.device, ceiling_kind.get(r.workload) or "")
        if c is not None and r.gbps is not None:
            r.ceiling, r.pct_of_ceiling = c[0], 100.0 * r.gbps / c[1]
        if (r.workload, r.size) in best_cpu:
            k0, e0 = best_cpu[(r.workload, r.size)]
            r.speedup = k0 / r.call_s
            r.speedup_e2e = e0 / r.end_to_end_s if r.end_to_end_s and math.isfinite(e0) else None


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
