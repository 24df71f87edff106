"""The command line of serve, loadtest and deploy: bad input is an `error:` + `hint:` and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from serve_testdata import make_checkpoint


def _bad(res, *words: str) -> None:
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert "error:" in res.stderr and "Traceback" not in res.stderr
    text = " ".join(res.stderr.split())  # the console wraps long lines
    for w in words:
        assert w in text


def test_commands_are_registered(run_cli):
    res = run_cli("--help")
    assert res.exit_code == 0
    for name in ("serve", "loadtest", "deploy"):
        assert name in res.stdout


def test_serve_bad_input(run_cli, tmp_path: Path):
    _bad(run_cli("serve", str(tmp_path / "missing")), "no model checkpoint")
    pytest.importorskip("torch")
    model = make_checkpoint(tmp_path / "run")
    _bad(run_cli("serve", str(model), "--workers", "-1"), "--workers must be 0")
    _bad(run_cli("serve", str(model), "--amp", "fp8"), "--amp")
    _bad(run_cli("serve", str(model), "--model-cpus", "-1"), "--model-cpus must be in 0..4096")
    _bad(
        run_cli("serve", str(model), "--workers", "1", "--model-cpus", "1", "--port", "0"),
        "--workers 1",
        "nothing to split",
    )
    _bad(run_cli("serve", str(model), "--api-key-env", "GPUKIT_SURELY_UNSET_VAR", "--port", "0"), "hint:")


def test_loadtest_bad_input(run_cli, tmp_path: Path):
    img = tmp_path / "a.jpg"
    img.write_bytes(b"\xff\xd8\xff")
    _bad(
        run_cli("loadtest", "http://192.0.2.7:8000/v1/predict", "--image", str(img)),
        "not a loopback",
        "--allow-host 192.0.2.7",
    )
    _bad(run_cli("loadtest", "ftp://127.0.0.1/", "--image", str(img)), "http://")
    _bad(run_cli("loadtest", "http://127.0.0.1:1/v1/predict", "--image", str(tmp_path / "none.jpg")), "does not exist")
    _bad(run_cli("loadtest", "http://127.0.0.1:1/v1/predict", "--image", str(img), "--concurrency", "0"))
    (tmp_path / "empty").mkdir()
    _bad(run_cli("loadtest", "http://127.0.0.1:1/v1/predict", "--image", str(tmp_path / "empty")), "no image")


def test_loadtest_against_nothing_reports_errors_not_a_crash(run_cli, tmp_path: Path):
    img = tmp_path / "a.jpg"
    img.write_bytes(b"\xff\xd8\xff")
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_cli(
        "loadtest",
        f"http://127.0.0.1:{port}/v1/predict",
        "--image",
        str(img),
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--concurrency",
        "2",
        "--processes",
        "1",
        "--max-requests",
        "20",
        "--json",
    )
    assert res.exit_code == 1, res.stderr  # nothing succeeded: a failure, not a throughput (issue 22)
    assert "no request succeeded" in res.stderr and "Traceback" not in res.stderr
    import json

    doc = json.loads(res.stdout)  # the result is still printed, to show what went wrong
    assert set(doc["statuses"]) == {"0"} and doc["errors"] and "Connect" in doc["errors"][0]
    assert doc["sent"] <= 20


def test_the_http_side_imports_neither_torch_nor_the_server_module():
    """An HTTP worker (spawned) imports the app, its core and the worker module: no torch (a worker's memory and
    start-up), and no import circle with server.py (which imports the worker only to start it)."""
    import subprocess
    import sys

    code = (
        "import sys, gpukit.serve.worker, gpukit.serve.app, gpukit.serve.core, gpukit.serve.protocol; "
        "print(sorted(m for m in ('torch', 'torchvision', 'gpukit.serve.server', 'gpukit.serve.engine') "
        "if m in sys.modules))"
    )
    pytest.importorskip("fastapi")
    import os

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env)
    assert out.stdout.strip() == "[]", out.stdout
