"""The report as a new user reads it (issue 26, item 7): tick labels that do not run into each other, each version
once, no raw keys or unitless figures, and seed claims that say what one side measured."""

from __future__ import annotations

import itertools

import pytest

from gpukit.bench.report_claims import NOT_MEASURED, seed_claims
from gpukit.bench.report_labels import ceiling_rows, machine_rows
from gpukit.bench.results import Ceilings, Result, Run

pytest.importorskip("matplotlib")


def _cpu_run() -> Run:
    rows = [
        Result("mandelbrot", "python", "cpu", "1536x1024x20", kernel_median_s=2.07, kernel_min_s=2.0,
               kernel_max_s=2.2, giter_per_s=0.004, throughput_unit="giter_per_s"),
        Result("mandelbrot", "numpy", "cpu", "1536x1024x20", kernel_median_s=0.139, kernel_min_s=0.13,
               kernel_max_s=0.15, giter_per_s=0.06, throughput_unit="giter_per_s"),
        Result("cnn-train", "torch-cpu", "cpu", "32:fp32", kernel_median_s=0.09, kernel_min_s=0.08,
               kernel_max_s=0.1, samples_per_s=350.0, throughput_unit="samples_per_s", size_x=32, size_group="fp32"),
        Result("cnn-train", "torch-cpu", "cpu", "32:bf16", kernel_median_s=0.08, kernel_min_s=0.07,
               kernel_max_s=0.09, samples_per_s=420.0, throughput_unit="samples_per_s", size_x=32, size_group="bf16"),
        Result("vector-add", "triton", "cuda", "1GiB:float32", status="skipped", reason="no CUDA device",
               hint="run on a GPU machine", skip_cause="unavailable"),
    ]  # fmt: skip
    ceilings = Ceilings(cpu_mem_gbps=10.5, cpu_threads=2, measured_at={"cpu_mem_gbps": "256MiB:float32"},
                        measured_x={"cpu_mem_gbps": 2.684e8})  # fmt: skip
    return Run(
        started_at="2026-12-01T00:00:00Z",
        machine={"hostname": "vm", "python": "3.11.7", "torch": "2.14.1", "gpu_names": []},
        versions={"python": "3.11.7", "torch": "2.14.1", "numpy": "2.4.6", "gpukit": "0.1.0"},
        settings={"backends": [], "sizes": [], "quick": True, "budget_s": 10.0},
        ceilings=ceilings,
        results=rows,
    )


def test_bar_chart_tick_labels_do_not_overlap() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from gpukit.bench.report_plots import bars_figure

    fig = bars_figure("cnn-train", _cpu_run().results)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    (ax,) = fig.axes
    labels = [t for t in ax.xaxis.get_ticklabels(minor=True) + ax.xaxis.get_ticklabels() if t.get_text()]
    labels = [t for t in labels if t.get_visible() and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
    assert len(boxes) >= 2
    for left, right in itertools.pairwise(boxes):  # apart by a readable gap, not touching ("3 × 10²4 × 10²")
        assert right.x0 - left.x1 >= 8, [t.get_text() for t in labels]
    assert all("times" not in t.get_text() for t in labels)  # plain numbers, not mathtext "3\times10^{2}"


def test_machine_rows_show_each_version_once_and_defaults_in_words() -> None:
    rows = dict(machine_rows(_cpu_run()))
    assert rows["version of PyTorch"] == "2.14.1" and rows["version of Python"] == "3.11.7"
    assert "PyTorch" not in rows and "version of torch" not in rows and "Python" not in rows
    assert rows["setting: backends"] == "every backend available"
    assert rows["setting: sizes"] == "each workload's default sizes"


def test_ceiling_rows_have_no_raw_keys() -> None:
    rows = ceiling_rows(_cpu_run())
    text = " ".join(f"{k} {v}" for k, v in rows)
    assert "cpu_mem_gbps" not in text and "measured x" not in text and "e+08" not in text
    values = dict(rows)
    assert values["CPU memory: copy on all cores (bytes read + written)"] == "10.5 GB/s (at 256MiB:float32)"


def test_claims_say_what_one_side_measured() -> None:
    claims = {c.key: c for c in seed_claims(_cpu_run(), [])}
    mb = claims["mandelbrot"].text
    assert "pure Python 2.07 s at the seed's frame (the article: 4.07 s)" in mb
    assert "best CPU numpy 139 ms" in mb and "no GPU row was measured" in mb
    assert "only CPU rows were measured" in claims["cnn"].text and "420 samples/s" in claims["cnn"].text
    assert "CPU memory 10.5 GB/s" in claims["bandwidth"].text
    assert claims["ann"].text == NOT_MEASURED and claims["tensor_cores"].text == NOT_MEASURED
