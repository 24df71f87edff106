"""One path from request to run: the typed request is stored on the run, and analyse applies each workload's
hook the same way for a plain bench, a sweep and a report (GEMM rows got % of ceiling only under --sweep)."""

from __future__ import annotations

import pytest

from gpukit.bench import BenchRequest, run
from gpukit.bench.analyse import analyse
from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads import get_workload
from gpukit.errors import ConfigError


def test_the_request_is_typed_frozen_and_stored_on_the_run() -> None:
    r = run("vector-add", backends=["numpy"], sizes=["4KiB"], ceilings=False, repeat=3, seed=7)
    assert isinstance(r.request, BenchRequest) and r.request.seed == 7 and r.request.repeat == 3
    assert r.settings["seed"] == 7 and r.settings["repeats"] == 3 and r.settings["call_timeout_s"] == 120.0
    with pytest.raises(AttributeError):
        r.request.seed = 8  # type: ignore[misc]
    fresh = BenchRequest().resolved()
    assert fresh.seed is not None and fresh.budget_s == 30.0
    assert BenchRequest(quick=True).resolved().budget_s == 10.0 and BenchRequest(sweep=True).resolved().budget_s == 5.0
    with pytest.raises(ConfigError, match="--sweep measures each workload's own ladder"):
        BenchRequest(sweep=True, sizes=("1MiB",))


def test_sizes_carry_magnitude_and_group_onto_results() -> None:
    (row,) = run("vector-add", backends=["numpy"], sizes=["1MiB:int32"], ceilings=False, repeat=3).results
    assert (row.size_x, row.size_group) == (2.0**20, "int32")
    assert get_workload("gemm").parse_size("4096:bf16").magnitude == 4096.0
    assert get_workload("mandelbrot").parse_size("1536x1024x20").magnitude == 1536 * 1024 * 20


def _gemm(backend: str, tflops: float) -> Result:
    return Result("gemm", backend, "cuda", "4096:bf16", dtype="bf16", check=True, kernel_median_s=1e-3,
                  kernel_min_s=1e-3, kernel_max_s=1e-3, tflops=tflops, throughput_unit="tflops", size_x=4096.0,
                  size_group="bf16")  # fmt: skip


def test_gemm_rows_get_pct_of_cublas_in_any_run() -> None:
    rows = [_gemm("cublas", 700.0), _gemm("triton", 672.0)]
    analyse(rows, Ceilings(), {"gemm": get_workload("gemm")})  # what a plain `gpukit bench gemm` now runs
    assert rows[0].pct_of_ceiling == pytest.approx(100.0) and rows[1].pct_of_ceiling == pytest.approx(96.0)
    assert rows[1].ceiling == "gemm_bf16_cublas_tflops" and rows[1].ceiling_note is None
