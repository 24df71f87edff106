"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) opens it, every image loads, no console
errors. Synthetic rows go through the real store and the real ``gpukit report`` command first.

The page itself has no script; the test injects one at the top of <head> that records error events and
``console.error`` calls, and after ``load`` writes what it found into a <pre id="__status"> that ``--dump-dom``
prints. Chromium's own console log (``--enable-logging=stderr``) is checked too.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

CHROMIUM = "/usr/bin/chromium"
HERE = Path(__file__).resolve().parent
PROBE = """<script>
window.__errors = [];
window.addEventListener("error", function (e) {
  window.__errors.push("error: " + (e.message || (e.target && (e.target.alt || e.target.src || e.target.tagName))));
}, true);
(function () {
  var orig = console.error;
  console.error = function () { window.__errors.push("console: " + Array.prototype.join.call(arguments, " "));
                                return orig.apply(console, arguments); };
})();
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var status = {
    images: imgs.length,
    broken: imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); })
                .map(function (i) { return i.alt; }),
    widths: imgs.map(function (i) { return i.naturalWidth; }),
    sections: Array.prototype.map.call(document.querySelectorAll("section"), function (s) { return s.id; }),
    height: document.body.scrollHeight,
    errors: window.__errors
  };
  var pre = document.createElement("pre");
  pre.id = "__status";
  pre.textContent = JSON.stringify(status);
  document.body.appendChild(pre);
});
</script>"""


def _synthetic_run():
    path = HERE.parent / "unit" / "bench" / "report_synthetic.py"
    spec = importlib.util.spec_from_file_location("report_synthetic_for_browser", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_run()


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="headless Chromium not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(run_cli, tmp_path):
    from gpukit.bench.report import SECTIONS
    from gpukit.history import open_history

    db = tmp_path / "history.db"
    with open_history(db) as history:
        history.save_run(_synthetic_run().to_dict())
    report = tmp_path / "report.html"
    res = run_cli("report", "--last", "--db", str(db), "-o", str(report))
    assert res.exit_code == 0, res.stderr
    page = tmp_path / "probe.html"
    page.write_text(report.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    profile = tmp_path / "profile"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        "--dump-dom",
        page.as_uri(),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<pre id="__status">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no status in the dumped DOM (rc {proc.returncode}): {proc.stderr[-2000:]}"
    status = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert status["errors"] == []
    assert status["sections"] == list(SECTIONS)
    assert status["images"] == 11 and status["broken"] == []
    assert all(w >= 600 for w in status["widths"])  # the PNGs decoded at their real size (700-750 px wide)
    assert status["height"] > 2000  # laid out, not an empty page
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
