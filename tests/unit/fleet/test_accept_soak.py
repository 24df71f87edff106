"""The soak's per-second trace: samples placed on the sampler's clock from the harness's call order, the sag found
over a rolling 3-second median, and flagged with the throttle reason NVML reported at that moment."""

from __future__ import annotations

import pytest

from gpukit.bench.harness import Settings
from gpukit.bench.results import Result
from gpukit.fleet.record import SoakPoint
from gpukit.fleet.soak import SAG_LIMIT, attribute, sag_of, sample_windows, soak_from_row, soak_settings
from gpukit.fleet.telemetry import Sampler

FLOPS = 2.0 * 8192**3


def _row(rates_tflops: list[float], inner: int = 100) -> Result:
    per_call = [FLOPS / (r * 1e12) for r in rates_tflops]
    return Result("gemm", "cublas", "cuda", "8192:bf16", repeats=len(per_call), inner=inner, samples_s=per_call,
                  flops=FLOPS, kernel_median_s=sorted(per_call)[len(per_call) // 2], tflops=700.0)  # fmt: skip


def _calls(row: Result, warmup: int, lead: int, t0: float = 100.0) -> list[float]:
    """Host times of every call in the harness's order: first, sizing, warm-up, (lead + inner) per sample, checked."""
    calls, t = [t0, t0 + 0.01], t0 + 0.02
    calls += [t + 0.001 * i for i in range(warmup)]
    t += 0.01
    for per_call in row.samples_s:
        calls += [t + 1e-5 * i for i in range(lead + row.inner)]  # issued in a burst, then the sample's sync
        t += per_call * row.inner
    return [*calls, t]  # the checked call after the timed ones, issued once the last sample ended


@pytest.mark.parametrize(("warmup", "lead"), [(1, 1), (1, 0), (0, 0)])
def test_sample_windows_follow_the_harness_call_order(warmup: int, lead: int) -> None:
    row = _row([700.0] * 5)
    calls = _calls(row, warmup, lead)
    windows = sample_windows(calls, row, warmup=1)
    assert windows is not None and len(windows) == 5
    for (start, end), per_call in zip(windows, row.samples_s, strict=True):
        assert end - start == pytest.approx(per_call * row.inner)
    assert windows[-1][1] == calls[-1]
    assert sample_windows(calls[:-3], row, warmup=1) is None  # a count that does not match is refused, not guessed


def test_sag_uses_a_rolling_median_against_the_first_quarter() -> None:
    assert sag_of([700.0, 701.0]) == (None, None)
    flat = [700.0, 702.0, 699.0, 701.0, 700.0, 698.0, 700.0, 701.0]
    sag, _ = sag_of(flat)
    assert sag is not None and sag < 0.01
    one_blip = [*flat[:4], 600.0, *flat[4:]]  # one bad second is not a sag: the rolling median hides it
    assert sag_of(one_blip)[0] < 0.01  # type: ignore[operator]
    sagging = [700.0, 700.0, 701.0, 699.0, 690.0, 670.0, 660.0, 655.0, 656.0, 657.0, 655.0, 656.0]
    sag, worst = sag_of(sagging)
    assert sag == pytest.approx(1 - 655.5 / 700.0, abs=2e-3) and worst is not None and worst >= 7


def test_attribute_reads_the_reasons_around_the_worst_second() -> None:
    trace = [SoakPoint(float(i), 700.0, throttle_reasons=["sw_power_cap"] if i == 4 else []) for i in range(8)]
    assert attribute(trace, 5) == ["sw_power_cap"]
    assert attribute(trace, 1) == []


def test_soak_settings_fill_the_soak_with_one_second_samples() -> None:
    s = soak_settings(30.0, 1.5e-3, Settings())
    assert (s.repeats, s.target_sample_s, s.warmup) == (30, 1.0, 1) and s.budget_s > 30
    fast = soak_settings(30.0, 0.5e-3, Settings())  # 1000 calls (the cap) make half a second: twice the samples
    assert fast.repeats == 60


def test_a_sag_is_flagged_with_the_throttle_reason_seen_at_that_moment() -> None:
    rates = [700.0] * 6 + [640.0] * 6  # 8.6 % down from second 7 on
    row = _row(rates)
    calls = _calls(row, warmup=1, lead=1)
    sampler = Sampler([0])
    sampler.t0 = calls[0]
    windows = sample_windows(calls, row, 1)
    assert windows is not None
    for k, (start, _end) in enumerate(windows):  # two NVML samples a second, thermal slowdown from second 7
        for t in (start + 0.1, start + 0.6):
            reasons = ["sw_thermal_slowdown"] if k >= 6 else []
            sampler.samples.append({"t_s": t - sampler.t0, "index": 0, "sm_clock_mhz": 1980 if k < 6 else 1700,
                                    "power_w": 690.0, "temp_c": 60 + k, "throttle_reasons": reasons})  # fmt: skip
    soak = soak_from_row(row, calls, 1, sampler, 0)
    assert [round(p.tflops) for p in soak.trace] == [round(r) for r in rates]
    assert soak.trace[0].sm_clock_mhz == 1980 and soak.trace[-1].sm_clock_mhz == 1700
    assert soak.trace[-1].temp_c == 71 and soak.trace[3].throttle_reasons == []
    assert soak.sag == pytest.approx(1 - 640 / 700, abs=1e-3) and soak.sag > SAG_LIMIT
    (flag,) = soak.flags
    assert "sag" in flag and "sw_thermal_slowdown" in flag
    assert soak.duration_s == pytest.approx(sum(row.samples_s) * row.inner, abs=1e-3)


def test_a_steady_soak_raises_no_flag_and_a_failed_row_no_trace() -> None:
    row = _row([700.0, 699.0, 701.0, 700.0, 698.0, 700.0])
    soak = soak_from_row(row, _calls(row, 1, 1), 1, None, None)
    assert soak.flags == [] and soak.sag is not None and soak.sag < SAG_LIMIT
    assert all(p.sm_clock_mhz is None for p in soak.trace)  # no sampler: no telemetry, never made up
    failed = Result("gemm", "cublas", "cuda", "8192:bf16", status="failed", reason="check failed")
    bad = soak_from_row(failed, [], 1, None, None)
    assert bad.status == "failed" and bad.trace == [] and bad.reason == "check failed"
