"""`gpukit fleet report` in a real browser: headless Chromium opens the page written from a real store, every image
loads, no console errors, every section there (tests/browser.py, as for the bench report)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fleet_synthetic as synth
from browser import console_lines, needs_chromium, open_page

pytest.importorskip("matplotlib")


@needs_chromium
def test_fleet_report_renders_in_headless_chromium(run_cli, tmp_path: Path) -> None:
    from gpukit.fleet.report import SECTIONS
    from gpukit.history import open_history

    db = tmp_path / "fleet.db"
    slowed = {(3, 1): ("gemm_bf16_tflops", 0.08), (9, 6): ("hbm_triad_gbps", 0.05)}
    with open_history(str(db)) as history:
        for rec in synth.fleet(12, 8, seed=7, slowed=slowed):
            history.save_acceptance(rec)
    out = tmp_path / "fleet.html"
    res = run_cli("fleet", "report", "--db", str(db), "-o", str(out))
    assert res.exit_code == 0, res.stderr
    assert "12 nodes, 96 GPUs, 2 flagged" in res.stdout
    page_html = out.read_text(encoding="utf-8")
    assert "http://" not in page_html and "https://" not in page_html  # self-contained
    status, log = open_page(page_html, tmp_path)
    assert status["errors"] == []
    assert status["sections"] == list(SECTIONS)
    # heatmap + one distribution per figure (7) + the soak traces of the flagged GPUs
    assert status["images"] == 9 and status["broken"] == []
    assert all(w >= 500 for w in status["widths"])
    captions = dict(status["captions"])
    assert "12 nodes × 7 figures" in captions["plot-heatmap"]
    assert (
        "2 flagged GPUs' soak traces; × a second with a throttle reason: hw_thermal_slowdown" in captions["plot-soak"]
    )
    assert "slow from" in captions["plot-dist-gemm_bf16_tflops"]
    assert status["height"] > 3000
    assert console_lines(log) == []
    outliers = page_html.split('<section id="outliers">', 1)[1].split("</section>", 1)[0]
    assert "node-003" in outliers and "gemm_bf16_tflops" in outliers and "node-009" in outliers
    assert "hw_thermal_slowdown" in outliers
