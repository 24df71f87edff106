"""Noise-based stopping, cold and hot rows, and samples discarded while the GPU throttled (recorded telemetry fed
through a fake NVML into the real reader, guard and harness)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpukit.bench import backends as backends_mod
from gpukit.bench.backends.base import Availability, Backend
from gpukit.bench.conditions import ThrottleGuard, resolve_cache
from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.timing import StopRule, measure, rel_mad
from gpukit.bench.workloads import get_workload
from gpukit.bench.workloads.base import Implementation
from gpukit.hardware import _nvml
from gpukit.hardware.state import ClockReader, _cpu_llc_bytes


class SeqClock:
    """A clock whose samples are the given per-sample seconds, in order (then the last one again)."""

    queues_ahead = False

    def __init__(self, times: list[float]) -> None:
        self.times = list(times)

    def start(self) -> None:
        pass

    def stop(self) -> float:
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


def test_rel_mad_is_robust() -> None:
    assert rel_mad([1.0, 1.0, 1.0, 1.0, 5.0]) == 0.0  # one outlier does not move it
    assert rel_mad([1.0, 1.1, 0.9]) == pytest.approx(0.1)


def test_sampling_stops_once_the_spread_is_below_the_target() -> None:
    noisy = [1.0, 1.3, 0.7, 1.25, 0.8]  # rel MAD 25 %: must go on
    quiet = [1.0] * 40
    s = measure(lambda i: None, SeqClock(noisy + quiet), warmup=0, stop=StopRule(0.005, 5, max_time_s=10.0))
    assert s.stopped_by == "noise" and 5 < len(s.times_s) < 45 and s.rel_mad <= 0.005


def test_a_row_that_never_settles_stops_on_time_and_says_so() -> None:
    swing = [1e-3, 1.1e-3, 0.9e-3] * 100000  # rel MAD 10 %: never below 0.5 %
    s = measure(lambda i: None, SeqClock(swing), warmup=0, stop=StopRule(0.005, 5, max_time_s=0.05))
    assert s.stopped_by == "time" and s.rel_mad > 0.005 and len(s.times_s) >= 5


def test_target_zero_takes_exactly_the_minimum_and_min_time_holds_it_back() -> None:
    s = measure(lambda i: None, SeqClock([1e-3, 2e-3]), warmup=0, stop=StopRule(0.0, 7))
    assert s.stopped_by == "count" and len(s.times_s) == 7
    held = measure(lambda i: None, SeqClock([0.01]), warmup=0, stop=StopRule(0.005, 3, min_time_s=0.095))
    assert held.stopped_by == "noise" and len(held.times_s) == 10  # settled at 3, but 0.1 s of timed calls first


class ListGuard:
    def __init__(self, verdicts: list[str | None]) -> None:
        self.verdicts = verdicts

    def before(self) -> None:
        pass

    def after(self) -> str | None:
        return self.verdicts.pop(0) if self.verdicts else None


def test_discarded_samples_are_counted_and_not_kept() -> None:
    guard = ListGuard(["throttled: hw_slowdown", None, "throttled: hw_slowdown", None, None, None])
    s = measure(lambda i: None, SeqClock([5.0, 1.0, 5.0] + [1.0] * 10), warmup=0, guard=guard,
                stop=StopRule(0.005, 4, max_time_s=10.0))  # fmt: skip
    assert s.discarded == {"throttled: hw_slowdown": 2} and s.times_s == [1.0] * 4


# ---- recorded telemetry through a fake NVML -----------------------------------------------------------------------

# Readings (SM MHz, clock-event mask) as a thermally throttled H100 runner reported them (sglang#39206: 375-480 MHz
# under HW/SW thermal slowdown), between healthy ones at the 1980 MHz application clock. Two readings per sample.
HEALTHY = (1980, 0x0)
POWER_CAPPED = (1755, 0x4)  # sw_power_cap alone, clock above 75 %: a GEMM at its power limit — kept
THERMAL = (480, 0x60)  # sw + hw thermal slowdown
SLOW_CLOCK = (1200, 0x0)  # below 75 % of 1980 with no reason given — discarded
RECORDED = [HEALTHY, HEALTHY, POWER_CAPPED, POWER_CAPPED, THERMAL, THERMAL, HEALTHY, SLOW_CLOCK] + [HEALTHY] * 400


class RecordedNvml:
    """The NVML calls ClockReader makes, answering from a recorded sequence of readings."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, readings: list[tuple[int, int]]) -> None:
        self.readings = list(readings)
        self._mask = 0

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetApplicationsClock(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        clock, self._mask = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        return clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._mask


@pytest.fixture
def recorded() -> Iterator[RecordedNvml]:
    fake = RecordedNvml(RECORDED)
    _nvml.use(fake)
    yield fake
    _nvml.reset()


def test_the_guard_discards_thermal_and_slow_clock_samples_and_keeps_a_power_cap(recorded: RecordedNvml) -> None:
    guard = ThrottleGuard(ClockReader(0))
    outcomes = []
    for _ in range(5):
        guard.before()
        outcomes.append(guard.after())
    assert outcomes == [None, None, "throttled: hw_thermal_slowdown, sw_thermal_slowdown",
                        "SM clock below 75% of the 1980 MHz application clock", None]  # fmt: skip


def test_a_clock_below_the_floor_at_the_power_cap_is_the_gpus_speed_not_a_throttle() -> None:
    # An H200 at its 700 W limit in a bf16 GEMM: 1290-1620 MHz with sw_power_cap (0x4), 65-82 % of 1980 MHz.
    fake = RecordedNvml([(1290, 0x4), (1620, 0x4), (1290, 0x0), (1290, 0x4)])
    _nvml.use(fake)
    try:
        guard = ThrottleGuard(ClockReader(0))
        outcomes = []
        for _ in range(2):
            guard.before()
            outcomes.append(guard.after())
    finally:
        _nvml.reset()
    assert outcomes == [None, "SM clock below 75% of the 1980 MHz application clock"]  # the cap gone, the clock low


class FakeGpu(Backend):
    """A 'cuda' backend on host arrays (the harness treats it as a GPU: throttle guard, cache from L2)."""

    name, device = "fake-gpu", "cuda"

    def availability(self) -> Availability:
        return Availability(True, version="fake")

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return np.empty(shape, dtype=dtype)


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    module = types.ModuleType("fake_gpu_module")
    module.FakeGpu = FakeGpu  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_gpu_module", module)
    monkeypatch.setitem(backends_mod.BACKENDS, "fake-gpu", "fake_gpu_module:FakeGpu")
    backends_mod.get_backend.cache_clear()
    yield
    backends_mod.get_backend.cache_clear()


def _gpu_row(settings: Settings, add: Any = None) -> Any:
    w = get_workload("vector-add")
    fn = add or (lambda inputs, out, size: np.add(inputs["a"], inputs["b"], out=out))
    w = replace(w, implementations={"fake-gpu": Implementation("fake-gpu", fn)})
    size = w.parse_size("64KiB")
    return run_one(w, "fake-gpu", size, prepare(w, size, np.random.default_rng(0)), settings)


def test_a_gpu_row_discards_the_throttled_samples_and_counts_them(recorded: RecordedNvml, fake_gpu: None) -> None:
    row = _gpu_row(Settings(repeats=5, warmup=1, budget_s=5.0, noise_target=0.0, cache="hot", throttle_check=True))
    assert row.ok, row.reason
    assert row.discarded == {"throttled: hw_thermal_slowdown, sw_thermal_slowdown": 1,
                             "SM clock below 75% of the 1980 MHz application clock": 1}  # fmt: skip
    assert row.repeats == 5 and len(row.samples_s) == 5  # five clean samples, besides the two discarded


def test_the_harness_alone_keeps_every_sample_and_the_fixed_count(recorded: RecordedNvml, fake_gpu: None) -> None:
    row = _gpu_row(Settings(repeats=5, warmup=1, budget_s=5.0))  # a direct caller (the soak counts its calls)
    assert row.ok and row.discarded == {} and row.repeats == 5 and row.stopped_by == "count"


def test_a_row_with_too_few_clean_samples_says_why(fake_gpu: None) -> None:
    _nvml.use(RecordedNvml([THERMAL]))
    try:
        row = _gpu_row(Settings(repeats=5, warmup=1, budget_s=5.0, max_time_s=0.2, cache="hot", throttle_check=True))
    finally:
        _nvml.reset()
    assert row.status == "failed" and row.kernel_median_s is None
    assert "too few clean samples: 0 kept" in (row.reason or "") and "hw_thermal_slowdown" in (row.reason or "")
    assert "throttled" in (row.hint or "")


def test_cold_rows_flush_one_call_per_sample_and_unknown_cache_measures_hot(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpukit.bench import conditions

    flushes: list[int] = []
    real = conditions.make_flush

    def counting(backend: Any, cache: int) -> Any:
        fn = real(backend, cache)
        return lambda: (flushes.append(1), fn())

    monkeypatch.setattr("gpukit.bench.conditions.make_flush", counting)
    monkeypatch.setattr("gpukit.hardware.state.cache_bytes", lambda device, index=0: 1 << 20)
    w = get_workload("vector-add")
    size = w.parse_size("64KiB")
    prep = prepare(w, size, np.random.default_rng(0))
    cold = run_one(w, "numpy", size, prep, Settings(repeats=5, warmup=1, budget_s=5.0, noise_target=0.0, cache="cold"))
    assert cold.ok and cold.cache == "cold" and cold.inner == 1 and len(flushes) == cold.repeats == 5
    hot = run_one(w, "numpy", size, prep, Settings(repeats=5, warmup=1, budget_s=5.0, noise_target=0.0, cache="hot"))
    assert hot.cache == "hot" and hot.inner > 1
    monkeypatch.setattr("gpukit.hardware.state.cache_bytes", lambda device, index=0: None)
    unknown = run_one(w, "numpy", size, prep, Settings(repeats=3, warmup=1, noise_target=0.0, cache="cold"))
    assert unknown.cache == "hot" and "unknown" in (unknown.cache_note or "")
    assert resolve_cache("auto", 1e6, 50 << 20, called_once=True) == ("cold", None)
    assert resolve_cache("auto", 1e9, 50 << 20, called_once=True) == ("hot", None)  # does not fit: hot
    assert resolve_cache("auto", 1e6, 50 << 20, called_once=False) == ("hot", None)  # a loop: hot
    # auto, a loop: the cache size is never read, and no row says "cold asked for" (every --quick row did)
    assert resolve_cache("auto", 1e6, None, called_once=False) == ("hot", None)


def test_cpu_last_level_cache_from_sysfs(tmp_path: Path) -> None:
    for i, (level, size) in enumerate([(1, "48K"), (2, "2048K"), (3, "105M")]):
        (tmp_path / f"index{i}").mkdir()
        (tmp_path / f"index{i}" / "level").write_text(f"{level}\n")
        (tmp_path / f"index{i}" / "size").write_text(f"{size}\n")
    assert _cpu_llc_bytes(tmp_path) == 105 << 20
    assert _cpu_llc_bytes(tmp_path / "missing") is None


def test_inputs_are_compared_bit_for_bit() -> None:
    from gpukit.bench.harness import same_bits

    a = np.random.default_rng(0).random(5_000_001, dtype=np.float32)  # several 16 MiB chunks... and a tail
    b = a.copy()
    assert same_bits(a, b)
    b[-1] = np.nextafter(b[-1], np.float32(2))  # one ulp in the last element
    assert not same_bits(a, b)  # the last 4 bytes are the tail after the 8-byte words
    b = a.copy()
    b[4_194_304] += 1.0  # inside the second chunk of words
    assert not same_bits(a, b)
    h = np.array([1.0, 2.0, 3.0], dtype=np.float16)  # 6 bytes: tail only
    assert same_bits(h, h.copy()) and not same_bits(h, np.array([1.0, 2.0, 4.0], dtype=np.float16))
    nan = np.array([np.nan, 0.0], dtype=np.float32)
    assert same_bits(nan, nan.copy()) and not same_bits(nan, np.array([np.nan, -0.0], dtype=np.float32))
    assert same_bits(np.arange(3, dtype=np.int64), np.arange(3, dtype=np.int32))  # read back in another dtype


class StateNvml(RecordedNvml):
    """Adds what gpu_states reads; no serial or MIG function, as in an older pynvml."""

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h: int) -> bytes:
        return b"GPU-1234"

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 700_000

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return 1

    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]:
        return (1, 1)


def test_gpu_state_reads_what_a_comparison_matches_and_unknown_stays_none() -> None:
    from gpukit.hardware.state import gpu_states

    _nvml.use(StateNvml([HEALTHY]))
    try:
        (state,) = gpu_states()
    finally:
        _nvml.reset()
    assert state == {"index": 0, "name": "NVIDIA H200", "serial": None, "uuid": "GPU-1234", "app_sm_clock_mhz": 1980,
                     "app_mem_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "power_limit_w": 700.0,
                     "persistence_mode": True, "ecc_enabled": True, "mig_enabled": None}  # fmt: skip
    _nvml.use(None, "no NVML here")
    try:
        assert gpu_states() == []
    finally:
        _nvml.reset()
