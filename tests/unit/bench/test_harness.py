"""The harness on CPU backends: verified results, caught wrong implementations, skipped/failed rows, analyse."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpukit.bench import Implementation, run
from gpukit.bench.analyse import analyse
from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads import get_workload

FAST = Settings(noise_target=0.0, repeats=3, warmup=1, budget_s=5.0)


def _run(workload: str, impl: str, size: str) -> Result:
    w = get_workload(workload)
    s = w.parse_size(size)
    return run_one(w, impl, s, lambda: prepare(w, s, np.random.default_rng(1)), FAST)


def _run_counted(monkeypatch: pytest.MonkeyPatch, calls: list[int]) -> Result:
    """A numpy add that counts its calls, with an NVML stand-in reading 1 J per call (3 samples, 2 warm-up)."""
    from types import SimpleNamespace

    from gpukit.bench import harness

    def add(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        calls[0] += 1
        np.add(inputs["a"], inputs["b"], out=out)

    monkeypatch.setattr(harness, "_telemetry", lambda _b, _i: SimpleNamespace(energy_j=float(calls[0]), to_dict=dict))
    monkeypatch.setattr(harness, "ENERGY_MIN_S", 0.0)
    w = replace(get_workload("vector-add"), implementations={"counted": Implementation("numpy", add)})
    s = w.parse_size("1000")
    return run_one(
        w,
        "counted",
        s,
        prepare(w, s, np.random.default_rng(0)),
        Settings(noise_target=0.0, repeats=3, warmup=2, budget_s=5),
    )


def _numpy_backend_with(monkeypatch: pytest.MonkeyPatch, **attrs: Any) -> Any:
    """The numpy backend with some attributes replaced (a clock, a pad, a device), served to the harness as "numpy"."""
    from types import SimpleNamespace

    from gpukit.bench import harness
    from gpukit.bench.backends import get_backend

    real = get_backend("numpy")
    fake = SimpleNamespace(**{**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")}, **attrs})
    monkeypatch.setattr(harness, "get_backend", lambda name: fake if name == "numpy" else get_backend(name))
    return fake


@pytest.mark.parametrize("impl", ["python", "numpy", "numba-cpu", "torch-cpu"])
@pytest.mark.parametrize("size", ["4096", "4096:int32"])
def test_vector_add_cpu_backends_verified(impl: str, size: str) -> None:
    r = _run("vector-add", impl, size)
    assert r.status == "ok", r.reason
    assert r.check is True
    assert r.error is not None and (r.error == 0.0 if size.endswith("int32") else 0 < r.error < 1e-6)
    assert r.kernel_min_s <= r.kernel_median_s <= r.kernel_max_s  # type: ignore[operator]
    assert r.gbps == pytest.approx(3 * 4096 * 4 / r.kernel_median_s / 1e9)  # type: ignore[operator]
    assert r.h2d_s == 0.0 and r.d2h_s == 0.0  # CPU data never crosses a bus


@pytest.mark.parametrize("impl", ["python", "numpy", "numba-cpu", "torch-cpu"])
def test_saxpy_cpu_backends_verified(impl: str) -> None:
    r = _run("saxpy", impl, "10000")
    assert r.status == "ok", r.reason
    assert r.error is not None and 0 < r.error < 1e-6  # float32 rounding is there, but small


@pytest.mark.parametrize("impl", ["python", "numpy", "numba-cpu", "torch-cpu"])
def test_mandelbrot_cpu_backends_verified(impl: str) -> None:
    r = _run("mandelbrot", impl, "96x64x50")
    assert r.status == "ok", r.reason
    assert r.giter_per_s is not None and r.giter_per_s > 0
    assert r.pct_of_ceiling is None  # compute-bound: no honest ceiling measured


def test_bandwidth_cpu_rows() -> None:
    for impl in ("numpy", "numba-cpu", "torch-cpu"):
        r = _run("bandwidth", impl, "1MiB")
        assert r.status == "ok" and r.check is True
        assert r.ceiling == "cpu_mem_gbps"


def _wrong(kind: str) -> Any:
    def fn(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        if kind == "skip-last":
            out[:-1] = inputs["a"][:-1] + inputs["b"][:-1]
        elif kind == "off-by-one":
            out[:] = inputs["a"] + inputs["b"] + 1

    return fn


@pytest.mark.parametrize("kind", ["skip-last", "nothing", "off-by-one"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_wrong_implementations_fail_the_check(kind: str, dtype: str) -> None:
    w = get_workload("vector-add")
    w = replace(w, implementations={"wrong": Implementation("numpy", _wrong(kind))})
    s = w.parse_size(f"1000:{dtype}")
    r = run_one(w, "wrong", s, prepare(w, s, np.random.default_rng(2)), FAST)
    assert r.status == "failed" and r.check is False
    assert "check failed" in (r.reason or "")
    assert r.kernel_median_s is None and r.gbps is None  # a failure is never a time
    assert r.compile_s is None and r.h2d_s is None and r.d2h_s is None  # not even the first call's or transfers'


def test_wrong_mandelbrot_fails() -> None:
    w = get_workload("mandelbrot")

    def off_by_one(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        out[:] = w.reference(size, inputs) - 1

    w = replace(w, implementations={"wrong": Implementation("numpy", off_by_one, dtype="float32")})
    s = w.parse_size("seed")
    r = run_one(w, "wrong", s, prepare(w, s, np.random.default_rng(0)), FAST)
    assert r.status == "failed" and r.check is False


def test_exceptions_and_unavailable_backends_become_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    w = get_workload("vector-add")

    def boom(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        raise MemoryError("CUDA out of memory. Tried to allocate 4 GiB")

    w = replace(w, implementations={"boom": Implementation("numpy", boom)})
    s = w.parse_size("100")
    r = run_one(w, "boom", s, prepare(w, s, np.random.default_rng(0)), FAST)
    assert r.status == "failed" and r.reason is not None and r.reason.startswith("out of memory")
    r = _run("vector-add", "cupy", "100")  # no cupy and no GPU here
    assert r.status == "skipped" and r.reason and r.hint


def test_pure_python_is_refused_with_its_estimate() -> None:
    r = _run("vector-add", "python", "1GiB")
    assert r.status == "skipped"
    assert r.reason is not None and "estimated" in r.reason and "budget" in r.reason


def test_seed_example_everywhere_gives_the_articles_answer() -> None:
    bench_run = run("vector-add", sizes=["seed"], device="cpu", ceilings=False, repeat=3)
    ok = [r for r in bench_run.results if r.ok]
    assert {r.backend for r in ok} >= {"python", "numpy", "numba-cpu", "torch-cpu"}
    for r in ok:
        assert r.output_preview == [8, 10, 12, 14, 16, 18]


def test_analyse_speedup_and_pct_of_ceiling() -> None:
    rows = [
        Result("vector-add", "numpy", "cpu", "1MiB", kernel_median_s=2.0, end_to_end_s=2.0, gbps=10.0),
        Result("vector-add", "numba-cpu", "cpu", "1MiB", kernel_median_s=1.0, end_to_end_s=1.0, gbps=20.0),
        Result("vector-add", "torch-cuda", "cuda", "1MiB", kernel_median_s=0.1, end_to_end_s=0.5, gbps=200.0),
        Result("vector-add", "cupy", "cuda", "1MiB", status="skipped", reason="x"),
    ]
    analyse(rows, Ceilings(cpu_mem_gbps=40.0, d2d_copy_gbps=400.0), {"vector-add": get_workload("vector-add")})
    assert rows[0].speedup == 0.5 and rows[1].speedup == 1.0
    assert rows[2].speedup == pytest.approx(10.0) and rows[2].speedup_e2e == pytest.approx(2.0)
    assert rows[0].pct_of_ceiling == 25.0 and rows[2].pct_of_ceiling == 50.0
    assert rows[2].ceiling == "d2d_copy_gbps" and rows[3].speedup is None


def test_energy_from_telemetry_when_the_loop_is_long(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpukit.bench import harness
    from gpukit.bench.workloads.base import Size

    class T:
        def __init__(self, e: float) -> None:
            self.energy_j = e

        def to_dict(self) -> dict[str, float]:
            return {"energy_j": self.energy_j}

    w = get_workload("vector-add")
    impl = w.implementations["numpy"]
    row = Result("vector-add", "x", "cuda", "1")
    size = Size("1", {"n": 10, "dtype": "float32"})
    harness._record(row, w, impl, size, np.zeros(10), [0.5, 0.5, 0.5], 1, T(100.0), T(130.0))
    assert row.energy_j == pytest.approx(10.0)  # 30 J over 3 calls
    assert row.telemetry == {"before": {"energy_j": 100.0}, "after": {"energy_j": 130.0}}
    short = Result("vector-add", "x", "cuda", "1")
    harness._record(short, w, impl, size, np.zeros(10), [0.01] * 3, 1, T(100.0), T(101.0))
    assert short.energy_j is None  # too short to read NVML's counter honestly


def test_ctrl_c_keeps_the_rows_already_measured() -> None:
    def progress(p: Any) -> None:
        if p.index == 2:
            raise KeyboardInterrupt

    bench_run = run(
        "vector-add",
        sizes=["1000"],
        backends=["numpy", "torch-cpu", "numba-cpu"],
        ceilings=False,
        repeat=3,
        progress=progress,
    )
    assert bench_run.interrupted
    assert [r.backend for r in bench_run.results] == ["numpy", "numba-cpu"]
    assert all(r.ok for r in bench_run.results)


def test_torch_gpu_backend_code_paths_on_cpu_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch CUDA backends' transfer/allocate/poison/copy code, pointed at CPU tensors (no GPU here)."""
    from gpukit.bench import harness
    from gpukit.bench.backends import get_backend
    from gpukit.bench.backends.base import Availability
    from gpukit.bench.backends.torch import TorchCudaBackend, TorchPageableOutBackend

    class CpuAsCuda(TorchCudaBackend):
        device = "cpu"  # tensors on the CPU; every other line is the CUDA backend's own

        def availability(self) -> Availability:
            return Availability(True)

    class PageableOnCpu(TorchPageableOutBackend):
        device = "cpu"

        def availability(self) -> Availability:
            return Availability(True)

    fakes = {"torch-cuda": CpuAsCuda(), "torch-d2h-pageable": PageableOnCpu()}
    monkeypatch.setattr(harness, "get_backend", lambda name: fakes.get(name) or get_backend(name))
    for workload, impl, size in [
        ("vector-add", "torch-cuda", "4096:int32"),
        ("saxpy", "torch-cuda", "4096"),
        ("mandelbrot", "torch-cuda", "96x64x50"),
        ("bandwidth", "torch-cuda", "64KiB"),
        ("bandwidth", "torch-cuda-h2d-pageable", "64KiB"),
        ("bandwidth", "torch-cuda-d2h-pageable", "64KiB"),
    ]:
        r = _run(workload, impl, size)
        assert r.status == "ok", (workload, impl, r.reason)
        assert r.check is True and r.h2d_s is not None and r.h2d_s > 0  # transfers are timed for this backend
    moved = _run("bandwidth", "torch-cuda-h2d-pageable", "64KiB")
    copied = _run("bandwidth", "torch-cuda", "64KiB")
    assert moved.ceiling == "h2d_pageable_gbps" and copied.ceiling == "d2d_copy_gbps"
    # a link moves each byte once; a copy within one memory reads and writes it
    assert moved.gbps == pytest.approx(64 * 1024 / moved.kernel_median_s / 1e9)  # type: ignore[operator]
    assert copied.gbps == pytest.approx(2 * 64 * 1024 / copied.kernel_median_s / 1e9)  # type: ignore[operator]


def test_energy_per_call_counts_every_call_between_the_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The energy readings bracket the warm-up calls as well as the timed ones: 1 J per call must read 1 J."""

    calls = [0]

    r = _run_counted(monkeypatch, calls)
    assert r.status == "ok" and r.energy_j == pytest.approx(1.0)


def test_event_clocked_samples_queue_one_untimed_call_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a clock that only queues its start (CUDA events), each sample is preceded by one untimed call, so the
    device is busy while the first timed call is launched; energy per call still counts those calls."""
    import time

    from gpukit.bench.timing import EventClock

    calls = [0]
    marks: list[tuple[str, int]] = []

    class Event:
        def record(self) -> None:
            self.t = time.perf_counter()
            marks.append(("record", calls[0]))

        def synchronize(self) -> None:
            pass

    pads: list[float] = []
    _numpy_backend_with(monkeypatch, clock=lambda: EventClock(Event, lambda s, e: e.t - s.t), pad=lambda: pads.append)

    r = _run_counted(monkeypatch, calls)
    assert r.status == "ok" and r.repeats == 3
    starts, ends = [c for k, c in marks[0::2]], [c for k, c in marks[1::2]]
    # every start event follows one more call than the previous sample's end: the untimed lead call
    assert [s - e for s, e in zip(starts[1:], ends[:-1], strict=True)] == [1, 1]
    assert [e - s for s, e in zip(starts, ends, strict=True)] == [r.inner] * 3
    assert r.energy_j == pytest.approx(1.0)
    assert len(pads) == 3 and all(0 < p <= 0.05 for p in pads)  # a pad ahead of every sample
    # the host's side of a call is reported; end to end counts the slower of it and the device time
    assert r.launch_s is not None and r.launch_s > 0
    assert r.end_to_end_s == pytest.approx(max(r.kernel_median_s, r.launch_s))  # type: ignore[type-var]


def test_energy_runs_sample_on_until_a_second_of_device_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """--energy on a GPU backend: the harness keeps sampling until the timed calls reach ENERGY_MIN_S, whatever the
    host-timed per-call estimate said, so every row gets its reading (an H200 run left 8 of 11 rows without)."""
    import time
    from types import SimpleNamespace

    from gpukit.bench import harness

    _numpy_backend_with(monkeypatch, device="cuda")
    joules, calls = [0.0], [0]

    def add(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        calls[0] += 1
        time.sleep(0.02 if calls[0] <= 2 else 0.002)  # the first-call and sizing calls look 10x slower, as on a GPU
        joules[0] += 0.5  # each call costs exactly 0.5 J
        np.add(inputs["a"], inputs["b"], out=out)

    monkeypatch.setattr(harness, "_telemetry", lambda _b, _i: SimpleNamespace(energy_j=joules[0], to_dict=dict))
    monkeypatch.setattr(harness, "ENERGY_MIN_S", 0.2)
    w = replace(get_workload("vector-add"), implementations={"slept": Implementation("numpy", add)})
    s = w.parse_size("1000")
    settings = Settings(noise_target=0.0, repeats=3, warmup=1, budget_s=5, energy=True)
    r = run_one(w, "slept", s, prepare(w, s, np.random.default_rng(0)), settings)
    assert r.status == "ok" and sum(r.samples_s) * r.inner >= 0.2  # type: ignore[arg-type]
    assert r.repeats is not None and r.repeats > 3
    assert r.energy_j == pytest.approx(0.5)
    calls[0] = 0
    quiet = run_one(w, "slept", s, prepare(w, s, np.random.default_rng(0)), replace(settings, energy=False))
    assert quiet.repeats == 3 and quiet.energy_j is None  # without --energy, no extra samples and no reading


def test_slow_calls_skip_warmup_and_quick_caps_their_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call slower than SLOW_CALL_S is warm after the first and sizing calls, and on a host clock the sizing call is
    its first sample; --quick (slow_repeats=3) takes three samples of it, a normal run all it asked for; a fast call
    keeps its warm-up and its repeats."""
    import time

    from gpukit.bench import harness

    monkeypatch.setattr(harness, "SLOW_CALL_S", 0.01)
    calls = [0]

    def slow_add(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        calls[0] += 1
        time.sleep(0.015)
        np.add(inputs["a"], inputs["b"], out=out)

    w = replace(get_workload("vector-add"), implementations={"slow": Implementation("numpy", slow_add)})
    s = w.parse_size("1000")
    prep = prepare(w, s, np.random.default_rng(0))
    quick = run_one(w, "slow", s, prep, Settings(noise_target=0.0, repeats=5, warmup=1, budget_s=5, slow_repeats=3))
    assert quick.status == "ok" and quick.repeats == 3 and quick.inner == 1
    # first call, then the sizing call — kept as the first sample (one synchronized call on the same host clock) —
    # and two more samples: no warm-up call, no call thrown away
    assert calls[0] == 2 + 2 and all(t >= 0.015 for t in quick.samples_s)
    calls[0] = 0
    full = run_one(w, "slow", s, prep, Settings(noise_target=0.0, repeats=5, warmup=1, budget_s=5))
    assert full.repeats == 5 and calls[0] == 2 + 4
    fast_w = get_workload("vector-add")
    fast = run_one(
        fast_w, "numpy", s, prep, Settings(noise_target=0.0, repeats=5, warmup=1, budget_s=5, slow_repeats=3)
    )
    assert fast.status == "ok" and fast.repeats == 5


def test_a_launch_bound_row_reports_the_rate_python_gets() -> None:
    """Kernel columns are device time, but a loop calling the kernel from Python runs at the host's launch when that
    is slower: throughput, speedup and end to end use Result.call_s = max(device, launch)."""
    from gpukit.bench import harness
    from gpukit.bench.workloads.base import Size

    w = get_workload("vector-add")
    size = Size("1000", {"n": 1000, "dtype": "float32"})
    gpu = Result("vector-add", "cupy-cuda-c", "cuda", "1000", launch_s=4e-5)
    harness._record(gpu, w, w.implementations["numpy"], size, np.zeros(1000), [1e-5, 1e-5, 1e-5], 1, None, None)
    assert gpu.kernel_median_s == 1e-5 and gpu.call_s == 4e-5 and gpu.launch_bound
    assert gpu.gbps == pytest.approx(3 * 1000 * 4 / 4e-5 / 1e9)  # at the launch rate, not the device's
    assert gpu.end_to_end_s == pytest.approx(4e-5)
    cpu = Result("vector-add", "numpy", "cpu", "1000", kernel_median_s=2e-5, end_to_end_s=2e-5)
    analyse([cpu, gpu], Ceilings(), {"vector-add": get_workload("vector-add")})
    assert gpu.speedup == pytest.approx(0.5)  # the CPU's 20 µs beats 40 µs per call from Python
    fast = Result("vector-add", "cupy-cuda-c", "cuda", "1000", launch_s=5e-6)
    harness._record(fast, w, w.implementations["numpy"], size, np.zeros(1000), [1e-5] * 3, 1, None, None)
    assert fast.call_s == 1e-5 and not fast.launch_bound


def test_energy_runs_queue_no_pad(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spin kernel between samples would be billed to the kernel's joules: --energy times with the lead call only."""
    import time

    from gpukit.bench import harness
    from gpukit.bench.timing import EventClock

    class Event:
        def record(self) -> None:
            self.t = time.perf_counter()

        def synchronize(self) -> None:
            pass

    pads: list[float] = []
    clock = lambda: EventClock(Event, lambda s, e: e.t - s.t)  # noqa: E731
    _numpy_backend_with(monkeypatch, device="cuda", clock=clock, pad=lambda: pads.append)
    monkeypatch.setattr(harness, "ENERGY_MIN_S", 0.001)
    w = get_workload("vector-add")
    s = w.parse_size("1000")
    prep = prepare(w, s, np.random.default_rng(0))
    assert (
        run_one(w, "numpy", s, prep, Settings(noise_target=0.0, repeats=3, warmup=1, budget_s=5, energy=True)).ok
        and pads == []
    )
    assert (
        run_one(w, "numpy", s, prep, Settings(noise_target=0.0, repeats=3, warmup=1, budget_s=5)).ok and len(pads) == 3
    )


class _DeviceChecks:
    """Stand-ins for a GPU backend's on-device comparisons, computed on the host and counted, with reads back
    (``to_host``) counted too: which path the harness took is then visible."""

    def __init__(self) -> None:
        from gpukit.bench.workloads.base import relative_error, same_bits

        self.same, self.err, self.reads = 0, 0, 0
        self._same, self._err = same_bits, relative_error

    def same_bits_on_device(self, x: Any, host: np.ndarray, uploads: dict[int, Any]) -> bool | None:
        self.same += 1
        uploads[id(host)] = (host, None)
        return x.shape == host.shape and x.dtype == host.dtype and self._same(np.asarray(x), host)

    def relative_error_on_device(self, x: Any, ref: np.ndarray, uploads: dict[int, Any]) -> float | None:
        self.err += 1
        return float(self._err(np.asarray(x), ref))

    def to_host(self, x: Any) -> np.ndarray:
        self.reads += 1
        return np.asarray(x)


def _with_device_checks(monkeypatch: pytest.MonkeyPatch) -> _DeviceChecks:
    dev = _DeviceChecks()
    _numpy_backend_with(monkeypatch, same_bits_on_device=dev.same_bits_on_device, to_host=dev.to_host,
                        relative_error_on_device=dev.relative_error_on_device)  # fmt: skip
    return dev


def test_outputs_and_inputs_are_checked_on_the_device_once_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a backend can compare on its device, only the first call's output is read back (its device→host time
    is a reported figure); the output after the first timed sample and after the timed calls is checked there (an
    element-wise workload by its relative error) and so is every rotated input copy: nothing else crosses the bus."""
    dev = _with_device_checks(monkeypatch)
    w = get_workload("vector-add")
    s = w.parse_size("4096")
    r = run_one(w, "numpy", s, prepare(w, s, np.random.default_rng(1)), FAST)
    assert r.status == "ok" and r.check is True, r.reason
    assert r.error is not None and 0 < r.error < 1e-6  # the error the device path computed, not a placeholder
    assert dev.reads == 1  # the first call's output
    assert dev.err == 2  # after the first timed sample, after the timed calls
    assert dev.same == 2 * 8  # inputs a and b of each of the 8 rotated copies (4096 floats are far below 256 MiB)


@pytest.mark.parametrize(
    ("cheat", "reason"),
    [
        ("first-only", "right on the first call, wrong after"),
        ("writes-input", "changed its input 'a'"),
    ],
)
def test_a_cheat_is_still_caught_through_the_device_checks(
    monkeypatch: pytest.MonkeyPatch, cheat: str, reason: str
) -> None:
    """The device paths say "not the same" as surely as the host ones: an output right only on the first call, and
    an input written over, fail with the same reasons."""
    dev = _with_device_checks(monkeypatch)
    calls = [0]

    def add(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        calls[0] += 1
        if cheat == "first-only" and calls[0] > 1:
            return  # leaves the poison the harness wrote before the timed calls
        np.add(inputs["a"], inputs["b"], out=out)
        if cheat == "writes-input":  # a[0] + b[0] stays within float32 rounding: only the input check sees it
            inputs["a"][:1] += 1.0
            inputs["b"][:1] -= 1.0

    w = replace(get_workload("vector-add"), implementations={"cheat": Implementation("numpy", add)})
    s = w.parse_size("4096")
    r = run_one(w, "cheat", s, prepare(w, s, np.random.default_rng(1)), FAST)
    assert r.status == "failed" and reason in (r.reason or ""), r.reason
    assert dev.err + dev.same > 0  # decided by the device path


def test_an_output_equal_to_the_reference_takes_the_reference_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy's output holds the reference's bytes: the workload's check runs once per size, on the reference
    against itself, and every output identical to it gets that verdict; an output that differs is checked in full
    (here: fails)."""
    from gpukit.bench.workloads.bandwidth import WORKLOAD

    checked: list[int] = []

    def counted(out: np.ndarray, ref: np.ndarray, size: Any) -> tuple[bool, float]:
        checked.append(out.size)
        return WORKLOAD.check(out, ref, size)

    def off_by_one(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        np.copyto(out, inputs["a"])
        out[-1] += 1.0

    w = replace(WORKLOAD, check=counted, implementations={
        "numpy": WORKLOAD.implementations["numpy"], "off": Implementation("numpy", off_by_one)})  # fmt: skip
    s = w.parse_size("1MiB")
    prep = prepare(w, s, np.random.default_rng(0))
    assert run_one(w, "numpy", s, prep, FAST).check is True
    assert len(checked) == 1  # the reference against itself; three outputs took its verdict
    assert run_one(w, "numpy", s, prep, FAST).check is True and len(checked) == 1  # the verdict is kept per size
    bad = run_one(w, "off", s, prep, FAST)
    assert bad.status == "failed" and "check failed" in (bad.reason or "")
    assert len(checked) == 2  # the differing output went through the workload's own check
