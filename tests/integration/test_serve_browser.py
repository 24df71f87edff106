"""The upload page in headless Chromium, driven over the DevTools protocol (a websocket; nothing is downloaded):
choose an image in the file input, wait for the label, check the bars and that a screenshot is not blank."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("torch")
websocket = pytest.importorskip("websocket")

from serve_harness import start_server  # noqa: E402
from serve_testdata import CLASSES, image_bytes, make_checkpoint  # noqa: E402

CHROMIUM = "/usr/bin/chromium"


class DevTools:
    """A minimal DevTools-protocol client: send a command, wait for its reply (events in between are dropped)."""

    def __init__(self, ws_url: str) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def __call__(self, method: str, **params: object) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg.get("result", {})

    def eval(self, expression: str) -> object:
        return self("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="headless Chromium not installed (apt-get install chromium)")
def test_upload_page_shows_the_label_in_headless_chromium(tmp_path):
    from PIL import Image

    model = make_checkpoint(tmp_path / "run")
    picture = tmp_path / "upload.png"
    picture.write_bytes(image_bytes("PNG", size=(64, 64)))
    srv = start_server(model, "--quiet")
    profile = tmp_path / "profile"
    browser = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "--window-size=900,700",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().count("\n") >= 1:
                break
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.loads(r.read()) if t["type"] == "page")
        cdp = DevTools(page["webSocketDebuggerUrl"])
        cdp("Page.enable")
        cdp("Page.navigate", url=srv.url + "/")
        for _ in range(100):
            if cdp.eval("document.readyState") == "complete" and cdp.eval("!!document.getElementById('file')"):
                break
            time.sleep(0.1)
        doc = cdp("DOM.getDocument")
        node = cdp("DOM.querySelector", nodeId=doc["root"]["nodeId"], selector="#file")["nodeId"]
        cdp("DOM.setFileInputFiles", files=[str(picture)], nodeId=node)  # fires 'change' → the page posts it
        label = ""
        for _ in range(150):
            label = str(cdp.eval("document.getElementById('label').textContent") or "")
            if label and label != "…":
                break
            time.sleep(0.1)
        assert label.split(" (")[0] in CLASSES, (label, cdp.eval("document.getElementById('error').textContent"))
        bars = cdp.eval("Array.from(document.querySelectorAll('#bars .row .name')).map(e => e.textContent)")
        assert bars == CLASSES
        assert "infer;dur=" in str(cdp.eval("document.getElementById('timing').textContent"))
        shot = base64.b64decode(cdp("Page.captureScreenshot", format="png")["data"])
        (tmp_path / "page.png").write_bytes(shot)
        im = Image.open(io.BytesIO(shot)).convert("L")
        lo, hi = im.getextrema()
        assert im.size[0] >= 800 and hi - lo > 100  # not a blank page: dark text on a light background
        assert len(np.unique(np.asarray(im.resize((90, 70))))) > 10
        cdp.ws.close()
    finally:
        browser.terminate()
        browser.wait(30)
        shutil.rmtree(profile, ignore_errors=True)
        assert srv.stop() == 0
