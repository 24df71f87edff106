"""The figures are bench rows: measured by the engine's harness, with a plan's own sample settings (the GEMMs'
steady state), and a failure that never raises."""

from __future__ import annotations

import pytest

from gpukit.fleet.accept_figures import STEADY_GEMM, FigurePlan, Measurer, Target, cuda_plan, figure_from_row

CPU = Target(0, None, None, None, "CPU")


def test_a_plan_sets_its_own_samples_and_the_row_is_checked() -> None:
    pytest.importorskip("torch")
    m = Measurer()
    plan = FigurePlan("gemm_fp32_tflops", "gemm", "torch-cpu", "64:fp32", (("repeats", 4), ("warmup", 1)))
    row = m.measure(plan, CPU)
    assert row.status == "ok" and row.repeats == 4 and row.check is True and row.error is not None
    fig = figure_from_row("gemm_fp32_tflops", row)
    assert fig.value == row.tflops and fig.unit == "TFLOP/s" and fig.spread is not None and fig.spread >= 0
    m.release()


def test_the_gpu_gemms_are_timed_in_the_steady_state() -> None:
    gemms = [p for p in cuda_plan() if p.workload == "gemm"]
    assert [p.size for p in gemms] == ["8192:bf16", "8192:fp8"]
    assert all(dict(p.settings) == dict(STEADY_GEMM) for p in gemms)
    steady = dict(STEADY_GEMM)
    assert steady["target_sample_s"] >= 1.0  # each sample averages the power cap's ~100 ms regulation
    assert steady["repeats"] >= 5 and steady["warmup"] >= 1000  # past the boost (~0.5 s) before the first sample


def test_a_device_that_cannot_be_selected_is_a_failed_row() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    m = Measurer()
    row = m.measure(FigurePlan("hbm_copy_gbps", "bandwidth", "torch-cuda", "1MiB"), Target(0, 0, None, None, "GPU"))
    assert row.status == "failed" and row.reason and row.throughput is None
    assert figure_from_row("hbm_copy_gbps", row).value is None
