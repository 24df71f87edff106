"""The estimates that decide which rows are measured, checked against what is then measured.

A row whose estimate passes the budget is skipped, so an estimate far above the truth hides a row that would have
run (issue 26: torch-cpu Mandelbrot "26.3 s" per call, measured 1.03 s). Every implementation with an estimator is
measured here beside its estimate; the stalled-call test holds the estimator to a known cost model.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gpukit.bench import Implementation
from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.workloads import WORKLOADS, _common, get_workload, mandelbrot

# (workload, implementation, size): every implementation that has an estimator and runs on this machine's CPU,
# at a size that measures in well under a second.
CASES = [
    ("mandelbrot", "python", "128x128x20"),
    ("mandelbrot", "numpy", "1536x1024x20"),
    ("mandelbrot", "numpy", "512x512x200"),
    ("mandelbrot", "numba-cpu", "1536x1024x20"),
    ("mandelbrot", "torch-cpu", "1536x1024x20"),
    ("mandelbrot", "torch-cpu", "512x512x200"),
    ("vector-add", "python", "1000000"),
    ("saxpy", "python", "1000000"),
    ("gemm", "torch-cpu", "512:fp32"),
]


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread: on a 2-core machine shared with other jobs, torch's thread barrier stalls each operation
    for a scheduler slice, and those stalls (not the estimator) would decide the comparison."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    _common._CALIBRATION.clear()
    yield
    torch.set_num_threads(before)


def test_cases_cover_every_cpu_estimator() -> None:
    with_estimate = {
        (workload, name)
        for workload in WORKLOADS
        for name, impl in get_workload(workload).implementations.items()
        if impl.estimate_s is not None
    }
    assert with_estimate == {(w, i) for w, i, _ in CASES}


@pytest.mark.parametrize(("workload", "impl", "size"), CASES)
def test_estimate_beside_measured(workload: str, impl: str, size: str) -> None:
    w = get_workload(workload)
    s = w.parse_size(size)
    row = run_one(w, impl, s, lambda: prepare(w, s, np.random.default_rng(0)), Settings(repeats=3, budget_s=60))
    assert row.ok, row.reason
    assert row.estimate_s is not None and row.estimate_s > 0  # recorded on the row, beside the measured time
    assert row.kernel_min_s is not None
    ratio = row.estimate_s / row.kernel_min_s
    # Never far above what is measured (that would skip a row that runs); not absurdly below either.
    assert 1 / 10 < ratio < 3, (row.estimate_s, row.kernel_min_s, row.samples_s)


def test_a_stalled_calibration_call_does_not_inflate_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake array backend costing 2 ms per call plus 50 ns per pixel, whose first call at every calibration frame
    stalls for 0.3 s (another process took the core): the estimate stays near the true cost."""
    seen: set[tuple[int, ...]] = set()

    def fake(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
        px = out.size
        if out.shape not in seen and px > 1000:
            seen.add(out.shape)
            time.sleep(0.3)
        time.sleep(2e-3 + 50e-9 * px)

    monkeypatch.setattr(_common, "CALIBRATION_CAP_S", 10.0)
    estimate = mandelbrot._estimator("fake-stall", fake, "numpy", 65536, linear=True)
    size = mandelbrot.parse_size("1536x1024x20")
    truth = 2e-3 + 50e-9 * 1536 * 1024
    assert truth / 2 < estimate(size) < truth * 2


def test_skipped_row_keeps_its_estimate() -> None:
    w = get_workload("mandelbrot")
    s = w.parse_size("4096x4096x1000")
    row = run_one(w, "python", s, lambda: prepare(w, s, np.random.default_rng(0)), Settings(budget_s=1))
    assert row.status == "skipped" and row.skip_cause == "estimate"
    assert row.estimate_s is not None and row.estimate_s > 1
    assert row.reason and f"estimated {row.estimate_s:.3g} s per call" in row.reason
    assert row.to_dict()["estimate_s"] == row.estimate_s and row.kernel_median_s is None


def test_rows_without_an_estimator_record_none() -> None:
    w = replace(get_workload("vector-add"), implementations={"plain": Implementation("numpy", _add)})
    s = w.parse_size("1000")
    row = run_one(w, "plain", s, prepare(w, s, np.random.default_rng(0)), Settings(repeats=3, budget_s=5))
    assert row.ok and row.estimate_s is None


def _add(inputs: Mapping[str, Any], out: Any, size: Any) -> None:
    np.add(inputs["a"], inputs["b"], out=out)


def test_csv_carries_the_estimate_and_the_skip_cause() -> None:
    import csv
    import io

    from gpukit.bench.results import Result
    from gpukit.cli.bench_render import to_csv

    rows = [
        Result("mandelbrot", "python", "cpu", "4096x4096x1000", status="skipped", reason="estimated 900 s per call",
               skip_cause="estimate", estimate_s=900.0),
        Result("mandelbrot", "numpy", "cpu", "1536x1024x20", kernel_median_s=0.14, estimate_s=0.12),
    ]  # fmt: skip
    read = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert [(r["skip_cause"], float(r["estimate_s"])) for r in read] == [("estimate", 900.0), ("", 0.12)]
    assert read[1]["kernel_median_s"] == "0.14"
