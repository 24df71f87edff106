"""`gpukit serve --engine auto` on the CPU, a real server in a subprocess: it builds eager and compile, gates and
times both, serves the one it chose only once that one is warm, and says which in its log, /v1/model and /metrics;
the second start reads the decision from the cache beside the checkpoint."""

from __future__ import annotations

import json
import time

import pytest
from serve_harness import request, start_server
from serve_testdata import INDUCTOR_CACHE, SIZE, image_bytes, make_checkpoint

from gpukit.serve.engines import compile_unavailable

pytest.importorskip("torch")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.skipif(bool(compile_unavailable(False)), reason=f"compile: {compile_unavailable(False)}")

_ENV = {"TORCHINDUCTOR_CACHE_DIR": str(INDUCTOR_CACHE), "TORCHINDUCTOR_COMPILE_THREADS": "1"}


def _ready(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, _, body = request(url + "/readyz")
        if status == 200:
            return
        assert json.loads(body)["status"] in ("loading", "warming")  # never ready before the engine is warm
        time.sleep(0.1)
    raise AssertionError("not ready in time")


def test_serve_engine_auto_serves_and_reports_its_engine(tmp_path):
    model = make_checkpoint(tmp_path / "run")
    server = start_server(model, "--engine", "auto", "--max-batch", "2", "--quiet", env=_ENV, timeout=150)
    try:
        _ready(server.url)
        status, _, body = request(server.url + "/v1/model")
        engine = json.loads(body)["engine"]
        assert status == 200 and engine["requested"] == "auto" and engine["engine"] in ("eager", "compile")
        assert {c["engine"] for c in engine["candidates"]} == {"eager", "compile"}
        assert all(c["images_per_s"] > 0 for c in engine["candidates"])  # each timed
        compiled = next(c for c in engine["candidates"] if c["engine"] == "compile")
        assert compiled["gate"]["passed"] and compiled["gate"]["source"] == "synthetic"
        status, _, body = request(server.url + "/metrics")
        assert f'gpukit_engine_info{{engine="{engine["engine"]}",gate=' in body.decode()
        status, _, body = request(
            server.url + "/v1/predict", image_bytes("PNG", (SIZE, SIZE)), {"content-type": "image/png"}
        )
        assert status == 200 and json.loads(body)["label"] in ("blue", "red")
        assert server.wait_log(f"engine {engine['engine']} (fp32); asked auto"), server.log
    finally:
        assert server.stop() == 0
    again = start_server(model, "--engine", "auto", "--max-batch", "2", "--quiet", env=_ENV, timeout=150)
    try:
        _ready(again.url)
        cached = json.loads(request(again.url + "/v1/model")[2])["engine"]
        assert cached["cached"] and cached["engine"] == engine["engine"]
        assert again.wait_log("decision from the cache"), again.log
    finally:
        assert again.stop() == 0
