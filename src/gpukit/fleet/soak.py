"""The soak: a sustained GEMM for ``soak_s`` seconds, as one bench row whose samples last a second each.

It is the bench engine's own row (``gemm`` through cuBLAS, bf16 8192³ on a GPU; fp32 through torch on the CPU) with
``target_sample_s = 1`` — the harness checks the first call and the output of the timed calls against the float64
reference, and times each one-second sample with CUDA events — so the trace is per-second throughput from device
time, not from a host loop of its own. The implementation is wrapped only to note the host clock at each call, which
places every sample on the sampler's time axis: each sample ends where the next one's first call is issued (the
harness synchronizes at every sample's end), and the last one where the checked call after the timed ones is.

Sag: 1 − (the worst 3-second rolling median) / (the median of the first quarter of the trace, ≥ 3 seconds). Above
:data:`SAG_LIMIT` (3 %) it is flagged and attributed to the throttle reasons NVML reported around that moment.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from statistics import median
from typing import Any

from gpukit.bench.harness import Settings
from gpukit.bench.results import Result
from gpukit.bench.workloads.base import Workload
from gpukit.fleet.accept_figures import FigurePlan, Measurer, Target
from gpukit.fleet.record import Soak, SoakPoint
from gpukit.fleet.telemetry import Sampler

__all__ = ["SAG_LIMIT", "attribute", "run_soak", "sag_of", "sample_windows", "soak_from_row", "soak_settings"]

SAG_LIMIT = 0.03
SAMPLE_S = 1.0
MAX_INNER = 1000  # timing.choose_inner's cap


def soak_settings(soak_s: float, call_s: float | None, base: Settings) -> Settings:
    """Samples of ~1 s (``call_s``: one GEMM's device time, measured by the GEMM figure) filling ``soak_s``."""
    per_sample = SAMPLE_S if not call_s else min(SAMPLE_S, MAX_INNER * call_s)
    repeats = max(3, math.ceil(soak_s / per_sample))
    return replace(base, repeats=repeats, warmup=1, target_sample_s=SAMPLE_S, budget_s=soak_s + 10.0)


def _recording(workload: Workload, impl: str, calls: list[float]) -> Workload:
    """``workload`` with ``impl`` wrapped to note ``time.perf_counter()`` at each call (nothing else changes)."""
    inner = workload.implementations[impl]

    def fn(inputs: Any, out: Any, size: Any) -> None:
        calls.append(time.perf_counter())
        inner.fn(inputs, out, size)

    return replace(workload, implementations={impl: replace(inner, fn=fn)})


def sample_windows(calls: list[float], row: Result, warmup: int) -> list[tuple[float, float]] | None:
    """(start, end) host time of each timed sample of ``row``, from the call times; None when the call count does
    not match the harness's order (first call, sizing call, warm-up, samples of lead + inner calls, checked call)."""
    n, reps, inner = len(calls), row.repeats, row.inner
    for lead in (0, 1):
        for w in (warmup, 0):
            if 2 + w + reps * (lead + inner) + 1 == n:
                firsts = [2 + w + k * (lead + inner) for k in range(reps)] + [n - 1]
                ends = [calls[j] for j in firsts[1:]]
                return [(end - t * inner, end) for end, t in zip(ends, row.samples_s, strict=True)]
    return None


def sag_of(rates: list[float]) -> tuple[float | None, int | None]:
    """(sag, index of the worst second) of a per-second trace; (None, None) under 3 seconds."""
    if len(rates) < 3:
        return None, None
    base = median(rates[: max(3, len(rates) // 4)])
    smooth = [median(rates[max(0, i - 1) : i + 2]) for i in range(len(rates))]
    worst = min(range(len(smooth)), key=smooth.__getitem__)
    return (1 - smooth[worst] / base if base > 0 else None), worst


def attribute(trace: list[SoakPoint], worst: int) -> list[str]:
    """Throttle reasons NVML reported within a second of the worst point of the trace."""
    seen: list[str] = []
    for p in trace[max(0, worst - 1) : worst + 2]:
        seen += [r for r in p.throttle_reasons if r not in seen]
    return seen


def _point(t_s: float, tflops: float, samples: list[dict[str, Any]]) -> SoakPoint:
    clocks = [s["sm_clock_mhz"] for s in samples if s.get("sm_clock_mhz") is not None]
    power = [s["power_w"] for s in samples if s.get("power_w") is not None]
    temps = [s["temp_c"] for s in samples if s.get("temp_c") is not None]
    reasons: list[str] = []
    for s in samples:
        reasons += [r for r in s.get("throttle_reasons") or [] if r != "gpu_idle" and r not in reasons]
    return SoakPoint(round(t_s, 3), float(f"{tflops:.5g}"), median(clocks) if clocks else None,
                     max(power) if power else None, max(temps) if temps else None, reasons)  # fmt: skip


def _trace(row: Result, windows: list[tuple[float, float]], sampler: Sampler | None, nvml: int | None,
           t0: float) -> list[SoakPoint]:  # fmt: skip
    flops = row.flops or 0.0
    points = []
    for (start, end), t in zip(windows, row.samples_s, strict=True):
        near: list[dict[str, Any]] = []
        if sampler is not None and nvml is not None:
            a, b = start - sampler.t0, end - sampler.t0
            near = sampler.samples_of(nvml, a, b) or sampler.samples_of(nvml, a - 0.5, b + 0.5)
        points.append(_point(end - t0, flops / t / 1e12 if t > 0 else 0.0, near))
    return points


def run_soak(measurer: Measurer, plan: FigurePlan, target: Target, soak_s: float, call_s: float | None,
             sampler: Sampler | None) -> tuple[Soak, Result]:  # fmt: skip
    """Run the soak on ``target``: the :class:`Soak` (trace, sag, flags) and the bench row it came from."""
    calls: list[float] = []
    workload = _recording(measurer.workload(plan.workload), plan.impl, calls)
    settings = soak_settings(soak_s, call_s, measurer.settings)
    row = measurer.measure(plan, target, settings, workload=workload)
    return soak_from_row(row, calls, settings.warmup, sampler, target.nvml_index), row


def soak_from_row(row: Result, calls: list[float], warmup: int, sampler: Sampler | None,
                  nvml_index: int | None) -> Soak:  # fmt: skip
    """The soak's trace, sag and flags from its bench row and the host times of its calls."""
    soak = Soak(duration_s=0.0, status=row.status, reason=row.reason)
    if not row.ok or not row.samples_s:
        return soak
    windows = sample_windows(calls, row, warmup)
    if windows is None:  # never expected from the harness: back-to-back samples ending at the last call
        end = calls[-1] if calls else time.perf_counter()
        t = end - sum(row.samples_s) * row.inner
        windows = []
        for s in row.samples_s:
            windows.append((t, t + s * row.inner))
            t += s * row.inner
    soak.trace = _trace(row, windows, sampler, nvml_index, windows[0][0])
    soak.duration_s = round(windows[-1][1] - windows[0][0], 3)
    _judge_sag(soak)
    return soak


def _judge_sag(soak: Soak) -> None:
    sag, worst = sag_of([p.tflops for p in soak.trace])
    soak.sag = sag
    if sag is None or worst is None or sag <= SAG_LIMIT:
        return
    reasons = attribute(soak.trace, worst)
    why = ", ".join(reasons) if reasons else "no throttle reason reported by NVML"
    soak.flags.append(f"sag: throughput fell {sag:.1%} at t = {soak.trace[worst].t_s:.0f} s ({why})")
