"""`gpukit fleet exporter`: the fleet's status on /metrics, checked by `promtool check metrics` (Debian package
``prometheus``; .ci/run installs it), in-process and as a real `python -m gpukit fleet exporter` process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import fleet_synthetic as synth

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("promtool is not installed: in CI the metrics must be checked (apt-get install prometheus)")
    pytest.skip("promtool is not installed (apt-get install prometheus)")


def _store(path: Path, records: list[dict]) -> str:
    from gpukit.history import open_history

    with open_history(str(path)) as history:
        for rec in records:
            history.save_acceptance(rec)
    return str(path)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    from gpukit.fleet.exporter import FleetMetrics, make_server

    db = _store(tmp_path / "fleet.db", synth.fleet(5, 8, seed=4, slowed={(2, 5): ("gemm_bf16_tflops", 0.07)}))
    server = make_server(FleetMetrics(db, cache_s=0.0), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", db
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode("utf-8")


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in the metrics")


def test_metrics_carry_the_fleet_judgement_and_pass_promtool(served: tuple[str, str]) -> None:
    url, _ = served
    code, ctype, text = _get(url + "/metrics")
    assert code == 200 and ctype.startswith("text/plain; version=0.0.4")
    slow = {"node": "node-002", "gpu": "5", "figure": "gemm_bf16"}
    assert _sample(text, "gpukit_accept_figure_flagged", **slow) == 1.0
    assert _sample(text, "gpukit_accept_figure_vs_fleet_ratio", **slow) == pytest.approx(0.93, abs=0.015)
    assert _sample(text, "gpukit_accept_gpu_verdict", node="node-002", gpu="5", verdict="slow") == 1.0
    assert _sample(text, "gpukit_accept_node_verdict", node="node-002", verdict="slow") == 1.0
    assert _sample(text, "gpukit_accept_node_verdict", node="node-000", verdict="ok") == 1.0
    bf16_median = synth.load_spread()["figures"]["gemm_bf16_tflops"]["median"] * 1e12  # FLOP/s, not TFLOP/s
    gemm = _sample(text, "gpukit_accept_gemm_bf16_flops_per_second", node="node-000", gpu="0")
    assert gemm == pytest.approx(bf16_median, rel=0.02)
    assert "gpukit_accept_last_run_timestamp_seconds" in text
    assert "sm_clock" not in text and "temp" not in text  # telemetry over time is dcgm-exporter's, not re-exported
    check = subprocess.run([_promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and check.stdout.strip() == "" and check.stderr.strip() == "", check


def test_other_paths_404_and_a_broken_store_503(served: tuple[str, str]) -> None:
    url, db = served
    assert _get(url + "/")[0] == 404
    Path(db).write_bytes(b"not a database" * 200)
    code, _, text = _get(url + "/metrics")
    assert code == 503 and text.startswith("error:")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gpukit(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpukit", *args]


def test_the_exporter_command_serves_and_refuses_bad_input(tmp_path: Path) -> None:
    db = _store(tmp_path / "fleet.db", synth.fleet(3, 2, seed=1))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    port = _free_port()
    proc = subprocess.Popen(_gpukit("fleet", "exporter", "--db", db, "--port", str(port), "--host", "127.0.0.1"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline, text = time.monotonic() + 60, ""
        while time.monotonic() < deadline and not text:
            try:
                text = _get(f"http://127.0.0.1:{port}/metrics")[2]
            except OSError:
                time.sleep(0.2)
        assert 'gpukit_accept_node_verdict{node="node-002",verdict="ok"} 1.0' in text
        busy = subprocess.run(_gpukit("fleet", "exporter", "--db", db, "--port", str(port), "--host", "127.0.0.1"),
                              env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr and "hint:" in busy.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 200)
    bad = subprocess.run(_gpukit("fleet", "exporter", "--db", str(garbage), "--port", str(_free_port())), env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "error:" in bad.stderr and "hint:" in bad.stderr and "Traceback" not in bad.stderr
