"""Headless Chromium for the report tests (Debian's ``chromium``): open a page with a probe script injected at the top
of its <head>, let it load, and read back what the probe saw.

The pages themselves have no script. The probe records error events and ``console.error`` calls, and after ``load``
writes what it found (images and their widths, sections, table rows, captions, page height, errors) into a
<pre id="__status"> that ``--dump-dom`` prints. Chromium's own console log (``--enable-logging=stderr``) comes back
too, for the tests to check.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "PROBE", "console_lines", "needs_chromium", "open_page"]

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="headless Chromium not installed (apt-get install chromium)"
)
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
    rows: Array.prototype.map.call(document.querySelectorAll("#machine tr, #ceilings tr"), function (tr) {
      return Array.prototype.map.call(tr.cells, function (c) { return c.textContent; });
    }),
    captions: Array.prototype.map.call(document.querySelectorAll("figcaption"), function (c) {
      return [c.parentNode.id, c.textContent];
    }),
    height: document.body.scrollHeight,
    errors: window.__errors
  };
  var pre = document.createElement("pre");
  pre.id = "__status";
  pre.textContent = JSON.stringify(status);
  document.body.appendChild(pre);
});
</script>"""


def open_page(page_html: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """(what the probe saw, Chromium's stderr) for ``page_html`` opened from a file in ``tmp_path``."""
    page = tmp_path / "probe.html"
    page.write_text(page_html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    profile = tmp_path / "profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
           "--dump-dom", page.as_uri()]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'<pre id="__status">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"no status in the dumped DOM (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(m.group(1))), proc.stderr


def console_lines(stderr: str) -> list[str]:
    """The page's console messages in Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]
