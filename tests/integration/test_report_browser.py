"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) opens it, every image loads, no console
errors. Synthetic rows go through the real store and the real ``gpukit report`` command first.

The probe script and the Chromium call are in tests/browser.py; Chromium's own console log is checked too.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from browser import console_lines, needs_chromium, open_page

pytest.importorskip("matplotlib")

HERE = Path(__file__).resolve().parent


def _synthetic_run():
    path = HERE.parent / "unit" / "bench" / "report_synthetic.py"
    spec = importlib.util.spec_from_file_location("report_synthetic_for_browser", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_run()


@needs_chromium
def test_report_renders_in_headless_chromium(run_cli, tmp_path):
    from gpukit.bench.report import SECTIONS
    from gpukit.history import open_history

    db = tmp_path / "history.db"
    with open_history(db) as history:
        history.save_run(_synthetic_run().to_dict())
    report = tmp_path / "report.html"
    res = run_cli("report", "--last", "--db", str(db), "-o", str(report))
    assert res.exit_code == 0, res.stderr
    status, log = open_page(report.read_text(encoding="utf-8"), tmp_path)
    assert status["errors"] == []
    assert status["sections"] == list(SECTIONS)
    assert status["images"] == 11 and status["broken"] == []
    assert all(w >= 600 for w in status["widths"])  # the PNGs decoded at their real size (700-750 px wide)
    assert status["height"] > 2000  # laid out, not an empty page
    assert console_lines(log) == []


RAW_KEY = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")  # gpu_names, cpu_mem_gbps: a key, not words


def _rows_from_page(status: dict) -> dict[str, str]:
    return {r[0]: r[1] for r in status["rows"] if len(r) == 2}


@needs_chromium
def test_report_shows_words_and_units_in_the_browser(run_cli, tmp_path):
    """What a person reads: labels in words, every figure with its unit, captions naming both roofs and the axes."""
    from gpukit.history import open_history

    run = _synthetic_run()
    run.machine = {**run.machine, "gpu_names": [], "hostname": "vm"}  # the "gpu_names []"
    db = tmp_path / "history.db"
    with open_history(db) as history:
        history.save_run(run.to_dict())
    report = tmp_path / "report.html"
    assert run_cli("report", "--last", "--db", str(db), "-o", str(report)).exit_code == 0
    status, _ = open_page(report.read_text(encoding="utf-8"), tmp_path)
    rows = _rows_from_page(status)
    assert not [k for k in rows if RAW_KEY.match(k)], rows  # no raw keys left
    assert rows["GPUs"] == "none found" and "[]" not in "".join(rows.values())
    assert rows["CPU memory: copy on all cores (bytes read + written)"] == "80.0 GB/s"
    assert rows["GPU memory: device-to-device copy (bytes read + written)"] == "4,175.0 GB/s"
    assert rows["GPU compute: best GEMM measured (bf16)"].endswith("TFLOP/s")
    assert rows["datasheet FP32 peak (dense)"] == "67.0 TFLOP/s"
    assert rows["host → device copy, pageable memory"] == "n/a (not measured)"
    captions = dict(status["captions"])
    roof = captions["plot-roofline"]
    assert "GPU memory roof 4,175 GB/s" in roof and "CPU memory roof 80 GB/s" in roof
    assert "GPU compute roof" in roof and "CPU compute roof" in roof and "measured GEMM" in roof
    bars = [c for k, c in captions.items() if k.startswith("plot-bars-")]
    assert bars and all("logarithmic axis" in c for c in bars)


def test_roofline_has_both_roofs_and_tight_axes():
    """The roofline's y-axis covers the points and roofs (not up to 10¹³ mostly empty), with a compute roof."""
    from gpukit.bench.report_plots import roofline_figure, roofs

    run = _synthetic_run()
    found = {r.device: r for r in roofs(run, 989e12)}
    assert found["gpu"].compute_source == "measured GEMM" and found["gpu"].compute_flops == pytest.approx(700e12, 0.1)
    assert found["cpu"].compute_flops == pytest.approx(2e12, rel=0.1) and found["cpu"].bandwidth_gbps == 80.0
    fig, caption = roofline_figure(run, 989e12)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert sum("memory roof" in lab for lab in labels) == 2 and sum("compute roof" in lab for lab in labels) == 2
    lo, hi = ax.get_ylim()
    assert hi <= 3 * 750e12 * 1.01  # three times the highest roof at most
    assert lo >= 1e6  # the slowest point / 3, not decades below it
    assert ax.get_xscale() == ax.get_yscale() == "log" and "FLOP/byte" in caption
    # ridge point of the GPU (700 TFLOP/s / 4,175 GB/s ≈ 168 FLOP/byte) lies inside the x-axis
    ridge = found["gpu"].compute_flops / (4175e9)
    assert ax.get_xlim()[0] < ridge < ax.get_xlim()[1]


def test_no_gemm_means_a_labelled_datasheet_roof_not_a_missing_one():
    from gpukit.bench.report_plots import roofline_figure, roofs

    run = _synthetic_run()
    run.results = [r for r in run.results if r.workload != "gemm"]
    found = {r.device: r for r in roofs(run, 989e12)}
    assert found["gpu"].compute_source == "datasheet" and found["cpu"].compute_flops is None
    caption = roofline_figure(run, 989e12)[1]
    assert "GPU compute roof 989.0 TFLOP/s (datasheet" in caption and "CPU compute roof not measured" in caption


def test_every_bar_chart_uses_the_same_log_axis():
    import matplotlib

    matplotlib.use("Agg", force=True)
    from gpukit.bench import report_plots as rp

    scales = []
    real_png = rp._png
    try:
        rp._png = lambda fig: scales.append(fig.axes[0].get_xscale()) or b""  # type: ignore[assignment]
        for w in ("gemm", "vector-add", "mandelbrot", "cnn-train", "mlp-train"):
            rp.bars_plot(w, _synthetic_run().results)
    finally:
        rp._png = real_png
    assert scales == ["log"] * 5  # it was linear for some workloads and log for others
