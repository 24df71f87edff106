"""Runs one workload × implementation × size into a verified :class:`Result` (the *measure* step of the engine).

Order per result (MEASURING.md), one function per stage:

1. :func:`_first_call` — fresh random inputs and their reference (shared by every implementation of that size),
   host→device transfer, a poisoned output, the first call (compile / JIT / first-call time, reported apart),
   device→host transfer and the check. A failed check is a ``failed`` row, never a time.
2. :func:`_sampling_plan` — one more synchronized call sizes the samples against the budget; small inputs are
   rotated among copies so timed calls do not find them in cache.
3. the timed samples through :func:`gpukit.bench.timing.measure`, into a *freshly poisoned* output;
4. :func:`_verify_timed` — the output of the timed calls is checked too (right on the first call and wrong after
   is a failure), and every input is compared with the host copy it came from (an implementation that overwrites
   its inputs computes something else on every later call);
5. :func:`_build_result` — the row's figures, once.

Anything an implementation raises — ``sys.exit()`` included — becomes a ``failed`` row with the reason; a call
running past ``Settings.call_timeout_s`` is ``failed: timed out``; only KeyboardInterrupt stops a run.
Figures that cannot be physically right are judged later, with the whole run, in :mod:`gpukit.bench.analyse`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpukit.bench.backends import get_backend
from gpukit.bench.backends.base import Backend
from gpukit.bench.conditions import cache_state, throttle_guard
from gpukit.bench.results import THROUGHPUT_UNITS, Result
from gpukit.bench.timing import HostClock, Samples, StopRule, choose_inner, measure, rel_mad
from gpukit.bench.watchdog import CALL_TIMEOUT_S, CallTimeout, watch
from gpukit.bench.workloads.base import Implementation, RelativeErrorCheck, Size, Workload, same_bits
from gpukit.errors import BackendUnavailable

__all__ = ["CALL_TIMEOUT_S", "Prepared", "Progress", "Settings", "cannot_run", "prepare", "run_one", "same_bits"]

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
MIN_CLEAN = 3  # fewer samples left after throttled ones are discarded: the row has no figure
NOISE_TARGET = 0.005  # MAD / median at which a row stops sampling (nvbench stops at 0.5 % relative deviation)


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
    """How one result is measured (resolved from a :class:`~gpukit.bench.request.BenchRequest`)."""

    repeats: int = 10
    warmup: int = 2
    budget_s: float = 30.0  # per result: estimate above it → skipped; samples stop once it is spent
    target_sample_s: float = 2e-3  # each sample lasts at least this long (back-to-back calls)
    energy: bool = False
    gpu_index: int = 0
    slow_repeats: int | None = None  # calls slower than SLOW_CALL_S take at most this many samples (--quick: 3)
    call_timeout_s: float | None = CALL_TIMEOUT_S  # per call (None: no watchdog)
    # Noise-based stopping and the throttle guard are what a BenchRequest asks for (request.py: 0.5 %, on); a caller
    # of the harness itself gets exactly ``repeats`` samples and every sample kept, as before (a soak that studies
    # throttling counts its calls and must see every sample).
    noise_target: float = 0.0  # stop once MAD / median is this small (0: exactly ``repeats`` samples)
    min_time_s: float = 0.0  # of timed calls before the noise may stop a row
    max_time_s: float = 3.0  # of sampling wall time: a row still noisier than the target then stops, unsettled
    cache: str = "auto"  # hot | cold | auto (bench/conditions.py)
    throttle_check: bool = False  # discard samples taken while the GPU throttled


@dataclass
class Prepared:
    """Host inputs and their reference for one workload × size, shared by every implementation; with the device
    copies a GPU backend compares its arrays against (``uploads``) and the reference's own verdict (``self_checks``),
    both made once for all of them."""

    inputs: dict[str, Any]
    ref: np.ndarray
    uploads: dict[int, Any] = field(default_factory=dict)
    self_checks: dict[str, tuple[bool, float] | None] = field(default_factory=dict)


def prepare(workload: Workload, size: Size, rng: np.random.Generator) -> Prepared:
    inputs = workload.make_inputs(size, rng)
    return Prepared(inputs=inputs, ref=workload.reference(size, inputs))


# What a row measured; a row that is not ok carries none of it (results.py: a failure is never a time).
_MEASURED_FIELDS = (
    *("compile_s", "h2d_s", "d2h_s", "kernel_median_s", "kernel_min_s", "kernel_max_s", "end_to_end_s", "energy_j"),
    "launch_s",
    "rel_mad",
    "settled",
    *THROUGHPUT_UNITS,
)


def _skip(base: Result, status: str, reason: str, hint: str | None = None, cause: str | None = None) -> Result:
    base.status, base.reason, base.hint, base.skip_cause = status, reason, hint, cause
    for name in _MEASURED_FIELDS:  # set before the check (first call, transfers) or before a later exception
        setattr(base, name, None)
    base.samples_s, base.repeats = [], 0
    return base


def _reason(exc: BaseException) -> tuple[str, str | None]:
    if isinstance(exc, SystemExit):
        return f"the implementation called sys.exit({exc.code!r})", "an implementation must return, not exit"
    if isinstance(exc, CallTimeout):
        return str(exc), "fix the implementation, or raise --call-timeout"
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


def base_row(workload: Workload, impl_name: str, size: Size, device: str = "cpu") -> Result:
    """The row's identity, before anything is measured: what every status (ok, skipped, failed) carries."""
    return Result(
        workload=workload.name,
        backend=impl_name,
        device=device,
        size=size.label,
        dtype=workload.dtype_of(size),
        throughput_unit=workload.unit,
        size_x=size.magnitude,
        size_group=size.group,
    )


def cannot_run(workload: Workload, impl_name: str, size: Size) -> Result | None:
    """The skipped row of an implementation that cannot run here at all — its backend is missing or the size is not
    one it supports — with that reason (``skip_cause`` "unavailable" or "unsupported"); None when it could run."""
    impl = workload.implementations[impl_name]
    base = base_row(workload, impl_name, size)
    try:
        backend = get_backend(impl.backend)
        base.device = backend.device
        avail = backend.availability()
    except Exception as exc:  # a broken backend module is that backend's problem only
        return _skip(base, "skipped", *_reason(exc), cause="unavailable")
    if not avail.ok:
        return _skip(base, "skipped", avail.reason or "not available", avail.hint, cause="unavailable")
    try:
        why = impl.supports(size) if impl.supports is not None else None
    except Exception as exc:
        return _skip(base, "failed", *_reason(exc))
    return _skip(base, "skipped", why, cause="unsupported") if why else None


def run_one(
    workload: Workload,
    impl_name: str,
    size: Size,
    prepared: Prepared | Callable[[], Prepared],
    settings: Settings,
) -> Result:
    """Measure one implementation at one size. ``prepared`` may be a callable so inputs are only built when some
    implementation actually runs. Never raises except KeyboardInterrupt."""
    if (skipped := cannot_run(workload, impl_name, size)) is not None:
        return skipped
    impl = workload.implementations[impl_name]
    base = base_row(workload, impl_name, size)
    backend = get_backend(impl.backend)
    base.device = backend.device
    try:
        # Measuring takes at least 5 calls (first, sizing, 3 samples); refuse what would pass the budget.
        est = impl.estimate_s(size) if impl.estimate_s is not None else None
    except Exception as exc:
        return _skip(base, "failed", *_reason(exc))
    base.estimate_s = est  # kept on the row beside what is then measured, so a wrong estimate shows
    if est is not None and est * 5 > settings.budget_s:
        return _skip(
            base,
            "skipped",
            f"estimated {est:.3g} s per call (~{est * 5:.0f} s to measure) exceeds the "
            f"{settings.budget_s:.0f} s budget",
            "pick a smaller --size for this backend, or raise --budget",
            cause="estimate",
        )
    try:
        return _measure(workload, impl, backend, size, prepared, settings, base)
    except KeyboardInterrupt:
        raise
    except BackendUnavailable as exc:  # a kernel module found its framework missing: skipped, with the hint
        return _skip(base, "skipped", exc.message, exc.hint, cause="unavailable")
    except (Exception, SystemExit, CallTimeout) as exc:  # sys.exit() in an implementation is its row's failure
        return _skip(base, "failed", *_reason(exc))
    finally:
        with contextlib.suppress(Exception):  # releasing cached memory is best effort
            backend.release()


@dataclass
class _Ctx:
    """What one measurement carries from stage to stage."""

    workload: Workload
    impl: Implementation
    backend: Backend
    size: Size  # with compute_dtype when the implementation computes in another precision
    prep: Prepared
    settings: Settings
    row: Result
    sets: list[dict[str, Any]]
    out: Any
    shape: tuple[int, ...]
    dtype: str

    def call(self, i: int = 0) -> None:
        self.impl.fn(self.sets[i % len(self.sets)], self.out, self.size)

    def watch(self, seconds: float | None = None, what: str = "a call") -> contextlib.AbstractContextManager[None]:
        return watch(seconds if seconds is not None else self.settings.call_timeout_s, what)


@dataclass(frozen=True)
class _Plan:
    one_s: float
    repeats: int
    inner: int
    warmup: int
    lead: int
    reuse: bool
    min_total_s: float
    pad: Callable[[float], None] | None
    queues_ahead: bool
    stop: StopRule
    cache: str = "hot"
    flush: Callable[[], None] | None = None


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
    if impl.dtype is not None:  # the tolerance follows the precision the implementation computes in
        size = size.with_params(compute_dtype=impl.dtype)
    ctx = _Ctx(workload, impl, backend, size, prep, settings, row, [], None, shape, dtype)
    if (failed := _first_call(ctx)) is not None:
        return failed
    plan = _sampling_plan(ctx)
    try:
        samples, before, after = _timed(ctx, plan)
    except _WrongAfter as exc:
        return _skip(row, "failed", f"right on the first call, wrong after: {exc}")
    if (failed := _verify_timed(ctx)) is not None:
        return failed
    return _build_result(ctx, plan, samples, before, after)


def _check(ctx: _Ctx, host_out: np.ndarray) -> tuple[bool, float]:
    """The workload's check of an output read back. One that holds the reference's bytes exactly gets the verdict
    the reference gets against itself (:func:`_reference_verdict`) without the check's arithmetic (a relative error
    in float64 over 1 GiB is most of a second)."""
    ref = ctx.prep.ref
    known = _reference_verdict(ctx) if host_out.dtype == ref.dtype and same_bits(host_out, ref) else None
    return _record_check(ctx, known or ctx.workload.check(host_out, ref, ctx.size))


def _check_where_it_is(ctx: _Ctx) -> tuple[bool, float]:
    """The output checked without reading it back where the backend can: an element-wise workload's relative error
    computed on the device, or any other output compared with the reference there and matching it bit for bit; read
    back and checked as usual otherwise (a mismatch is the workload's check to judge)."""
    backend, ref, uploads = ctx.backend, ctx.prep.ref, ctx.prep.uploads
    if isinstance(check := ctx.workload.check, RelativeErrorCheck):  # its verdict reads the error alone
        if (err := backend.relative_error_on_device(ctx.out, ref, uploads)) is not None:
            return _record_check(ctx, check.verdict(err, ctx.size))
    elif backend.same_bits_on_device(ctx.out, ref, uploads) and (known := _reference_verdict(ctx)):
        return _record_check(ctx, known)
    return _check(ctx, backend.to_host(ctx.out))


def _reference_verdict(ctx: _Ctx) -> tuple[bool, float] | None:
    """The workload's check of the reference against itself, once per size and precision: what an output identical
    to the reference is given. None when the reference does not pass its own check (every output is then checked)."""
    key = repr(sorted(ctx.size.params.items()))
    if key not in ctx.prep.self_checks:
        ok, err = ctx.workload.check(ctx.prep.ref, ctx.prep.ref, ctx.size)
        ctx.prep.self_checks[key] = (True, err) if ok else None
    return ctx.prep.self_checks[key]


def _record_check(ctx: _Ctx, verdict: tuple[bool, float]) -> tuple[bool, float]:
    ctx.row.check, ctx.row.error, ctx.row.tolerance = verdict[0], verdict[1], ctx.workload.tolerance(ctx.size)
    return verdict


def _check_reason(ctx: _Ctx, err: float, when: str = "") -> str:
    """Why a check failed, in the check's own terms: a check that gives no tolerance said no, and that is what
    is printed (not "tolerance None")."""
    tol = ctx.row.tolerance
    said = f"tolerance {tol:.3g}" if tol is not None else "the workload's check said no; it gives no tolerance"
    return f"check failed{when}: relative error {err:.3g} ({said})"


def _first_call(ctx: _Ctx) -> Result | None:
    """Transfer in, first call into a poisoned output, transfer out, check. Returns the failed row, or None."""
    row, backend = ctx.row, ctx.backend
    # Host→device: the inputs' first trip; the transfer clock syncs before reading the host clock.
    tclock = backend.transfer_clock()
    tclock.start()
    ctx.sets = [_to_device(ctx.impl, backend, ctx.prep.inputs, ctx.size)]
    row.h2d_s = tclock.stop() if backend.has_transfers else 0.0
    ctx.out = backend.poisoned(ctx.shape, ctx.dtype)

    # First call: JIT / compile / autotune plus one run, synchronized (reported apart, never as kernel time).
    host_clock = HostClock(backend.synchronize)
    with ctx.watch(what="the first call"):
        host_clock.start()
        ctx.call()
        row.compile_s = host_clock.stop()

    tclock.start()
    host_out = backend.to_host(ctx.out)
    row.d2h_s = tclock.stop() if backend.has_transfers else 0.0
    ok, err = _check(ctx, host_out)
    if host_out.size <= 16:
        row.output_preview = host_out.ravel().tolist()
    if not ok:
        return _skip(row, "failed", _check_reason(ctx, err))
    return None


def _sampling_plan(ctx: _Ctx) -> _Plan:
    """One more synchronized call estimates the per-call time; from it: samples, inner calls, rotation, pad,
    the cache state and when sampling stops."""
    s, backend = ctx.settings, ctx.backend
    host_clock = HostClock(backend.synchronize)
    with ctx.watch(what="the sizing call"):
        host_clock.start()
        ctx.call()
        one_s = max(host_clock.stop(), 1e-9)
    in_bytes = _array_bytes(ctx.prep.inputs)
    working = float(in_bytes + int(np.prod(ctx.shape)) * np.dtype(ctx.dtype).itemsize)
    cache, ctx.row.cache_note, flush = cache_state(s.cache, backend, s.gpu_index, working, ctx.workload.called_once)
    ctx.row.cache = cache
    # Rotate small inputs among copies so timed calls do not find them in cache; a call slower than 50 ms
    # (pure Python) would not benefit and the copies would only cost memory and time. A cold row flushes instead.
    small = 0 < in_bytes < ROTATE_BELOW_BYTES[backend.device]
    if small and cache == "hot" and ctx.impl.prepare is None and one_s < 0.05:
        copies = min(MAX_COPIES, math.ceil(ROTATE_BELOW_BYTES[backend.device] / in_bytes))
        ctx.sets += [_to_device(ctx.impl, backend, ctx.prep.inputs, ctx.size) for _ in range(copies - 1)]
    inner = 1 if cache == "cold" else choose_inner(one_s, s.target_sample_s)  # cold: only a first call is cold
    slow = one_s > SLOW_CALL_S
    warmup = 0 if slow else s.warmup  # a slow call is its own warm-up (two calls already ran)
    queues_ahead = bool(getattr(backend.clock(), "queues_ahead", False))  # a backend's own clock may predate it
    lead = 1 if queues_ahead and one_s < LEAD_BELOW_S and cache == "hot" else 0  # a lead call would warm the cache
    repeats = max(3, min(s.repeats, int(s.budget_s / (one_s * (inner + lead))) or 3))
    # Energy: sample on until the timed calls make a second of device time (the per-call estimate above is a
    # host-timed call, launch and sync included, so counting samples from it fell short of the second).
    min_total_s = ENERGY_MIN_S * 1.05 if s.energy and backend.device == "cuda" else 0.0
    pad = None
    if queues_ahead and not s.energy:  # with --energy, a spin between samples would be billed to the kernel
        try:
            pad = backend.pad()
        except Exception:  # without a pad the lead call still hides most of a launch, and the row's launch_s
            pad = None  # shows whether the host, not the device, set the pace
    # A slow call timed by a host clock: the sizing call above was exactly one sample (one call, synchronized, the
    # same clock), so it is kept as the first one — pure-Python Mandelbrot then runs 4 calls, not 5, of ~1.5 s each.
    # (The output checked after timing is the other samples': at least two calls, into a freshly poisoned buffer.)
    reuse = slow and inner == 1 and not queues_ahead and not s.energy and cache == "hot"
    stop = StopRule(
        target=s.noise_target,
        min_samples=repeats - 1 if reuse else repeats,
        min_time_s=s.min_time_s,
        max_time_s=min(s.max_time_s, s.budget_s),
        max_samples=(s.slow_repeats - (1 if reuse else 0)) if slow and s.slow_repeats else None,
    )
    return _Plan(one_s, repeats, inner, warmup, lead, reuse, min_total_s, pad, queues_ahead, stop, cache, flush)


class _WrongAfter(Exception):
    """The output read right after the first timed sample failed its check."""


def _first_sample_check(ctx: _Ctx) -> Callable[[], None] | None:
    """Checks the output right after the first timed sample (the end of sampling may come seconds later, when a
    result written late by a background thread has landed). Not for workloads that write ``out`` on a first call
    only (``republish``: checked once more after the timed calls instead)."""
    if not ctx.workload.checks_timed_calls or ctx.workload.republish is not None:
        return None

    def check() -> None:
        ok, err = _check_where_it_is(ctx)
        if not ok:
            raise _WrongAfter(_check_reason(ctx, err, " right after the first timed sample"))

    return check


def _timed(ctx: _Ctx, plan: _Plan) -> tuple[Samples, Any, Any]:
    """The timed samples, into a freshly poisoned output (so what is checked afterwards is what they wrote): the
    first call's buffer poisoned again in place, not a new one (an implementation that skips outputs it already
    wrote is caught, and a 256 MiB ceiling row touches 256 MiB less fresh memory)."""
    if ctx.workload.checks_timed_calls:
        ctx.out = ctx.backend.repoison(ctx.out, ctx.dtype)
    before = _telemetry(ctx.backend, ctx.settings.gpu_index)
    limit = None if ctx.settings.call_timeout_s is None else ctx.settings.budget_s + ctx.settings.call_timeout_s
    with ctx.watch(limit, what="the timed calls"):
        samples = measure(
            ctx.call,
            ctx.backend.clock(),
            repeats=plan.repeats - 1 if plan.reuse else plan.repeats,
            warmup=plan.warmup,
            inner=plan.inner,
            max_total_s=ctx.settings.budget_s,
            lead=plan.lead,
            min_total_s=plan.min_total_s,
            pad=plan.pad,
            stop=plan.stop,
            guard=throttle_guard(ctx.backend.device, ctx.settings.throttle_check, ctx.settings.gpu_index),
            flush=plan.flush,
            after_first=_first_sample_check(ctx),
        )
        ctx.backend.synchronize()  # sync: the last timed call's output is read next
    after = _telemetry(ctx.backend, ctx.settings.gpu_index)
    return samples, before, after


def _verify_timed(ctx: _Ctx) -> Result | None:
    """The timed calls' output checked against the reference, and the inputs compared with their host copies."""
    row = ctx.row
    if ctx.workload.checks_timed_calls:
        if ctx.workload.republish is not None:  # it writes ``out`` on a first call only: one more, checked
            last = ctx.sets[-1]
            ctx.workload.republish(last)
            with ctx.watch(what="the checked call after the timed ones"):
                ctx.impl.fn(last, ctx.out, ctx.size)
                ctx.backend.synchronize()  # sync: its output is read next
        with ctx.watch(what="checking the output"):
            ok, err = _check_where_it_is(ctx)
        if not ok:
            why = _check_reason(ctx, err, " after the timed calls")
            return _skip(row, "failed", f"right on the first call, wrong after: {why}")
    for i, dev in enumerate(ctx.sets):
        for key, host in ctx.prep.inputs.items():
            if not isinstance(host, np.ndarray) or key not in dev or isinstance(dev[key], int | float | str):
                continue
            if (same := ctx.backend.same_bits_on_device(dev[key], host, ctx.prep.uploads)) is None:
                try:
                    now = np.asarray(ctx.backend.to_host(dev[key]))
                except Exception:  # not an array this backend can read back (a prepared object): not comparable
                    continue
                same = now.shape != host.shape or same_bits(now, host)
            if not same:
                copy = f" (copy {i + 1} of {len(ctx.sets)})" if len(ctx.sets) > 1 else ""
                why = f"the implementation changed its input '{key}'{copy}: every later call computed something else"
                return _skip(row, "failed", why, "an implementation must not write to its inputs")
    return None


def _build_result(ctx: _Ctx, plan: _Plan, samples: Samples, before: Any, after: Any) -> Result:
    """Stage 5: the row's figures, once, from the timed samples."""
    times = list(samples.times_s)
    if plan.reuse:
        times.insert(0, plan.one_s)
    row = ctx.row
    row.stopped_by, row.discarded = samples.stopped_by, dict(samples.discarded)
    row.noise_target = ctx.settings.noise_target or None
    if len(times) < MIN_CLEAN:
        why = ", ".join(f"{n} {reason}" for reason, n in samples.discarded.items()) or "none discarded"
        return _skip(row, "failed", f"too few clean samples: {len(times)} kept, {sum(samples.discarded.values())} "
                     f"discarded ({why})", "the GPU throttled while this row ran: let it cool down, check "
                     "nvidia-smi -q -d PERFORMANCE, and run it again")  # fmt: skip
    if plan.queues_ahead and samples.issue_s:  # the host's side of each call: launch-bound when it exceeds the kernel
        ctx.row.launch_s = float(np.median(samples.issue_s))
    # what the timed calls cycle through (rotated input copies and the output): whether a cache could hold it
    out_bytes = int(np.prod(ctx.shape)) * np.dtype(ctx.dtype).itemsize
    ctx.row.working_set_bytes = float(_array_bytes(ctx.prep.inputs) * len(ctx.sets) + out_bytes)
    return _record(ctx.row, ctx.workload, ctx.impl, ctx.size, ctx.prep.ref, times, plan.inner, before, after,
                   samples.warmup, plan.lead)  # fmt: skip


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
) -> Result:
    """Times, throughput and energy of a measured row (``row.launch_s`` already set). A workload whose amount of
    work is not a positive number fails the row: its throughput would be a negative or NaN figure."""
    amount = (impl.amount or workload.amount)(size, ref)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount <= 0:
        why = f"the amount of work per call is {amount!r}: it must be a positive number"
        return _skip(row, "failed", why, "fix the workload's amount() (or the implementation's)")
    t = sorted(times)
    row.samples_s = list(times)
    row.repeats, row.inner = len(times), inner
    row.rel_mad = rel_mad(times)
    row.settled = row.rel_mad <= row.noise_target if row.noise_target else None
    row.kernel_median_s = float(np.median(t))
    row.kernel_min_s, row.kernel_max_s = t[0], t[-1]
    # A caller cannot issue calls faster than the host launches them: throughput and end to end use the slower of
    # device time and launch (Result.call_s); the kernel columns stay device time.
    per_call = row.call_s or row.kernel_median_s
    row.end_to_end_s = (row.h2d_s or 0.0) + per_call + (row.d2h_s or 0.0)
    row.flops, row.bytes = workload.flops(size), workload.bytes(size)
    setattr(row, workload.unit, amount / per_call / THROUGHPUT_UNITS[workload.unit][0])
    row.ceiling = impl.ceiling  # analyse fills pct_of_ceiling; an explicit name here wins over the kind
    if before is not None or after is not None:
        row.telemetry = {
            "before": before.to_dict() if before is not None else None,
            "after": after.to_dict() if after is not None else None,
        }
        timed_s = sum(times) * inner
        e0, e1 = getattr(before, "energy_j", None), getattr(after, "energy_j", None)
        if e0 is not None and e1 is not None and timed_s >= ENERGY_MIN_S:
            calls = len(times) * (inner + lead) + warmup  # the readings bracket the warm-up and lead calls too
            row.energy_j = (e1 - e0) / calls  # per call of the kernel
    return row
