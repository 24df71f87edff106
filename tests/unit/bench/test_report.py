"""The report: every section, every plot, the seed claims filled from the rows present and never invented."""

from __future__ import annotations

import base64
import re

import pytest

from gpukit.bench.report import NO_CROSSOVER, SECTIONS, build_report, to_html, to_markdown
from gpukit.bench.report_claims import NOT_MEASURED
from gpukit.bench.results import Run

pytest.importorskip("matplotlib")

from report_synthetic import synthetic_run  # tests/unit/bench is on sys.path under pytest

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report():
    return build_report(synthetic_run())


def test_every_section_and_plot_is_in_the_html(report):
    doc = to_html(report)
    for sid, title in SECTIONS.items():
        assert f'<section id="{sid}"><h2>{title}' in doc.replace("&#x27;", "'")
    names = {p.name for p in report.plots}
    expected = {f"speedup-{w}" for w in ("gemm", "cnn-train", "mlp-train", "vector-add", "mandelbrot")}
    expected |= {f"bars-{w}" for w in ("gemm", "cnn-train", "mlp-train", "vector-add", "mandelbrot")}
    assert names == expected | {"roofline"}
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', doc)
    assert len(images) == len(report.plots)
    for data in images:
        assert base64.b64decode(data).startswith(PNG)
    assert "http://" not in doc and "https://" not in doc  # self-contained


def test_plots_land_in_their_sections(report):
    doc = to_html(report)
    crossover = doc[doc.index('<section id="crossover">') : doc.index('<section id="roofline">')]
    assert 'id="plot-speedup-gemm"' in crossover
    roofline = doc[doc.index('<section id="roofline">') : doc.index('<section id="throughput">')]
    assert 'id="plot-roofline"' in roofline


def test_seed_claims_are_computed_from_the_rows(report):
    claims = {c.key: c for c in report.claims}
    assert set(claims) == {"mandelbrot", "cnn", "ann", "bandwidth", "tensor_cores", "data_grows"}
    assert "47×" in claims["mandelbrot"].text and "pure Python 5.17 s" in claims["mandelbrot"].text
    # cnn at batch 32: CPU 64 ms vs GPU 1.32 ms per step
    assert "at the seed's batch 32: GPU 48.48× faster" in claims["cnn"].text
    # the small MLP at batch 1: CPU 50 µs vs GPU 300 µs → the CPU is 6× faster
    assert "batch 1: CPU 6.00× faster" in claims["ann"].text
    assert "4,175 GB/s vs CPU memory 80 GB/s → 52.2×" in claims["bandwidth"].text
    assert "4096³" in claims["tensor_cores"].text and "fp32 (CUDA cores) 49.6 TFLOP/s" in claims["tensor_cores"].text
    assert "gemm/bf16: GPU faster from 1024:bf16" in claims["data_grows"].text


def test_missing_rows_say_not_measured_never_a_number():
    run = synthetic_run(with_training=False)
    run.ceilings.cpu_mem_gbps = None
    report = build_report(run)
    claims = {c.key: c for c in report.claims}
    for key in ("cnn", "ann"):
        assert claims[key].measured is None and claims[key].text == NOT_MEASURED
    # one side measured: said as such, never a ratio
    bandwidth = claims["bandwidth"].text
    assert bandwidth.startswith("GPU device-to-device copy 4,175 GB/s") and "×" not in bandwidth
    doc = to_html(report)
    assert doc.count(NOT_MEASURED) == 2
    empty = build_report(Run(started_at="2026-11-30T00:00:00Z"))
    assert all(c.measured is None for c in empty.claims)
    assert [p.name for p in empty.plots] == ["roofline"]
    assert to_markdown(empty, "plots").count(NOT_MEASURED) == 6
    assert NO_CROSSOVER in to_markdown(empty, "plots") and NO_CROSSOVER in to_html(empty)


def test_markdown_has_sections_tables_and_plot_links(report):
    md = to_markdown(report, "report_plots")
    for title in SECTIONS.values():
        assert f"\n## {title}\n" in md
    for p in report.plots:
        assert f"(report_plots/{p.name}.png)" in md
    assert "| gemm | bf16 | kernel only | 1024:bf16 | ≈ 272 | 256:bf16 |" in md
    assert "no AVX-VNNI/AMX on this CPU" in md  # skipped rows keep their reason


def test_failed_and_skipped_rows_are_marked_in_html(report):
    doc = to_html(report)
    assert '<tr class="failed"><td>gemm</td><td>cublas</td>' in doc
    assert '<tr class="skipped"><td>gemm</td><td>torch-cpu</td>' in doc


def test_gemm_section_sets_rates_against_datasheet_and_measured_cublas(report):
    from gpukit.bench.report import gemm_rows

    rows, notes = gemm_rows(report.run)
    by = {(r[0], r[1]): r for r in rows}
    # cuBLAS bf16 at 4096³: 2·4096³ / (2e-5 + 2·4096³/700e12) s = 635.3 TFLOP/s; H200 datasheet bf16 989
    assert by[("cublas", "bf16")][2:] == ["4096", "635.3", "64.2%", "100.0%", "100.0%"]
    assert by[("triton", "bf16")][5:] == ["86.2%", "86.2%"]
    assert by[("torch-cpu", "fp32")][4:] == ["n/a", "n/a", "n/a"]  # no datasheet or cuBLAS figure for a CPU
    assert notes == ["triton bf16 at 4096³: 547.4 TFLOP/s = 86.2% of cuBLAS bf16 (635.3 TFLOP/s), same run"]
    assert notes[0] in to_html(report) and notes[0] in to_markdown(report, "p")
