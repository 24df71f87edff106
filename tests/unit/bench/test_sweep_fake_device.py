"""`run_sweep` end to end through the real runner and harness, on a fake CPU and a fake GPU whose clocks advance by
known amounts: CPU 1 µs per element; GPU 100 µs launch + 10 ns per element, transfers 0.5 µs per element each way.
Kernel only, the lines cross at 100e-6 / (1e-6 − 1e-8) ≈ 101 elements; end to end at ≈ 1e-4 / (1e-6 − 1.01e-6) → never.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpukit.bench import backends as backends_mod
from gpukit.bench import sweep
from gpukit.bench import workloads as workloads_mod
from gpukit.bench.backends.base import Availability, Backend
from gpukit.bench.results import Ceilings
from gpukit.bench.workloads.base import Implementation, Size, Workload, elementwise_check

NOW = [0.0]  # the fake devices' shared virtual clock, seconds


class VirtualClock:
    def start(self) -> None:
        self._t0 = NOW[0]

    def stop(self) -> float:
        return NOW[0] - self._t0


class FakeBackend(Backend):
    transfer_s_per_item = 0.0

    def availability(self) -> Availability:
        return Availability(True, version="fake")

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return np.empty(shape, dtype=dtype)

    def to_device(self, host: np.ndarray) -> Any:
        NOW[0] += self.transfer_s_per_item * host.size
        return host.copy()

    def to_host(self, x: Any) -> np.ndarray:
        NOW[0] += self.transfer_s_per_item * x.size
        return np.asarray(x)

    def clock(self) -> Any:
        return VirtualClock()

    def transfer_clock(self) -> Any:
        return VirtualClock()


class FakeCpu(FakeBackend):
    name, device = "fake-cpu", "cpu"


class FakeGpu(FakeBackend):
    name, device, has_transfers = "fake-gpu", "cuda", True
    transfer_s_per_item = 0.5e-6


def _kernel(cost) -> Any:
    def fn(inputs: Any, out: Any, size: Size) -> None:
        out[:] = inputs["a"]
        NOW[0] += cost(size["n"])

    return fn


LADDER = [16, 32, 64, 128, 256, 512, 1024]
FAKE = Workload(
    name="fake-copy",
    description="copy on fake devices",
    unit="gbps",
    sizes=lambda quick: [Size(str(n), {"n": n, "dtype": "float32"}) for n in LADDER],
    parse_size=lambda text: Size(text, {"n": int(text), "dtype": "float32"}),
    make_inputs=lambda size, rng: {"a": rng.random(size["n"], dtype=np.float32) + 0.5},
    reference=lambda size, inputs: inputs["a"].astype(np.float64),
    check=elementwise_check,
    output_spec=lambda size: ((size["n"],), "float32"),
    flops=lambda size: 0.0,
    bytes=lambda size: 8.0 * size["n"],
    amount=lambda size, ref: 8.0 * size["n"],
    ceiling=None,
    implementations={
        "fake-cpu": Implementation("fake-cpu", _kernel(lambda n: 1e-6 * n)),
        "fake-gpu": Implementation("fake-gpu", _kernel(lambda n: 1e-4 + 1e-8 * n)),
    },
)


@pytest.fixture
def fake_registry(monkeypatch):
    import sys
    import types

    module = types.ModuleType("fake_sweep_module")
    module.WORKLOAD = FAKE
    module.FakeCpu, module.FakeGpu = FakeCpu, FakeGpu
    monkeypatch.setitem(sys.modules, "fake_sweep_module", module)
    monkeypatch.setitem(workloads_mod.WORKLOADS, "fake-copy", "fake_sweep_module:WORKLOAD")
    monkeypatch.setitem(backends_mod.BACKENDS, "fake-cpu", "fake_sweep_module:FakeCpu")
    monkeypatch.setitem(backends_mod.BACKENDS, "fake-gpu", "fake_sweep_module:FakeGpu")
    monkeypatch.setattr("gpukit.bench.ceilings.measure_ceilings", lambda **kw: Ceilings(notes=["fake"]))
    backends_mod.get_backend.cache_clear()
    yield
    backends_mod.get_backend.cache_clear()


def test_run_sweep_finds_the_known_crossover_on_a_fake_device(fake_registry):
    run = sweep.run_sweep(["fake-copy"], quick=True, repeat=3, seed=0, budget_s=5.0)
    assert run.settings["sweep"] is True and run.ceilings.notes == ["fake"]
    rows = {(r.backend, r.size): r for r in run.results}
    assert all(r.status == "ok" for r in run.results), [r.reason for r in run.results if not r.ok]
    # the harness measured exactly the virtual costs
    assert rows[("fake-cpu", "256")].kernel_median_s == pytest.approx(256e-6)
    assert rows[("fake-gpu", "256")].kernel_median_s == pytest.approx(1e-4 + 256e-8)
    assert rows[("fake-gpu", "256")].speedup == pytest.approx(256e-6 / (1e-4 + 256e-8))
    found = {c["mode"]: c for c in run.settings["crossovers"]}
    kernel, e2e = found["kernel"], found["end_to_end"]
    assert kernel["status"] == "crosses" and kernel["size"] == "128" and kernel["below"] == "64"
    assert 64 < kernel["x_estimate"] < 128  # the analytic point is ≈ 101
    assert e2e["status"] == "never"  # moving the data costs more than the CPU's whole job


def test_sweep_budget_skips_what_was_not_started_and_records_wall_times(fake_registry, monkeypatch):
    import time

    t = [1000.0]

    def fake_perf_counter() -> float:  # each reading advances one second: the budget runs out after a few rows
        t[0] += 1.0
        return t[0]

    monkeypatch.setattr(time, "perf_counter", fake_perf_counter)
    run = sweep.run_sweep(["fake-copy"], quick=True, repeat=3, seed=0, budget_s=5.0, total_s=4.0)
    skipped = [r for r in run.results if r.status == "skipped"]
    measured = [r for r in run.results if r.ok]
    assert measured and skipped, [(r.backend, r.size, r.status) for r in run.results]
    assert all(r.reason == "sweep time budget of 4 s spent before this size started" for r in skipped)
    assert all(r.hint and "--sweep-budget" in r.hint for r in skipped)
    # once out of time, every later row is skipped: measured rows all come first
    assert run.results.index(skipped[0]) == len(measured)
    assert set(run.settings["workload_s"]) == {"fake-copy"} and run.settings["workload_s"]["fake-copy"] > 0
    assert run.settings["missing_workloads"] == [] and run.settings["partial_workloads"] == []
    assert run.settings["sweep_budget_s"] == 4.0 and run.settings["budget_s"] == 5.0
