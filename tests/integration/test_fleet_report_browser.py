"""`gpukit fleet report` in a real browser: headless Chromium opens the page written from a real store, every image
loads, no console errors, every section there (the probe script is the one the bench report's browser test uses)."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


synth = _load("fleet_synthetic_browser", HERE.parent / "unit" / "fleet" / "fleet_synthetic.py")
bench_browser = _load("report_browser_probe", HERE / "test_report_browser.py")


@pytest.mark.skipif(not Path(bench_browser.CHROMIUM).exists(), reason="headless Chromium not installed")
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
    probe = tmp_path / "probe.html"
    probe.write_text(page_html.replace("<head>", "<head>" + bench_browser.PROBE, 1), encoding="utf-8")
    profile = tmp_path / "profile"
    cmd = [bench_browser.CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
           "--dump-dom", probe.as_uri()]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<pre id="__status">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no status in the dumped DOM (rc {proc.returncode}): {proc.stderr[-2000:]}"
    status = json.loads(html.unescape(m.group(1)))
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
    assert [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln] == []
    outliers = page_html.split('<section id="outliers">', 1)[1].split("</section>", 1)[0]
    assert "node-003" in outliers and "gemm_bf16_tflops" in outliers and "node-009" in outliers
    assert "hw_thermal_slowdown" in outliers
