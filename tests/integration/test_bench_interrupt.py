"""SIGINT in the middle of `gpukit bench --sweep` keeps what was measured: exit 130, the partial run as JSON with
``interrupted: true``, the run saved in the history, and `gpukit report --last` able to report it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("GPUKIT_DB", None)
    return env


def _wait_for_lines(path: Path, prefix: str, count: int, proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text(encoding="utf-8", errors="replace")
        if sum(line.startswith(prefix) for line in text.splitlines()) >= count:
            return text
        if proc.poll() is not None:
            pytest.fail(f"bench exited early ({proc.returncode}): {text[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"no {count} progress lines within {timeout_s} s: {path.read_text()[-2000:]}")


def test_sigint_during_a_sweep_saves_and_prints_the_partial_run(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    out, err = tmp_path / "out.json", tmp_path / "err.txt"
    cmd = [sys.executable, "-m", "gpukit", "bench", "--sweep", "--device", "cpu", "--json", "--db", str(db)]
    cmd += ["--repeat", "3", "--budget", "1"]
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=_env(), cwd=tmp_path)
        # one progress line per result, written before it starts: three lines = two results finished
        _wait_for_lines(err, "bench ", 3, proc, timeout_s=90)
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("bench did not stop within 60 s of SIGINT")
    stderr = err.read_text(encoding="utf-8")
    assert rc == 130, stderr[-2000:]
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["interrupted"] is True
    ok = [r for r in doc["results"] if r["status"] == "ok"]
    assert len(ok) >= 2 and all(r["workload"] == "gemm" for r in ok)
    assert doc["settings"]["partial_workloads"] == ["gemm"]
    assert "mlp-train" in doc["settings"]["missing_workloads"]
    assert "not measured (interrupted): cnn-train" in stderr

    from gpukit.bench.results import Run
    from gpukit.history import open_history

    with open_history(db, create=False) as history:
        runs = history.list_runs(limit=5)
        assert len(runs) == 1
        saved = Run.from_dict(history.load_run(runs[0].id))
    assert saved.interrupted and len([r for r in saved.results if r.ok]) == len(ok)

    report = subprocess.run(
        [sys.executable, "-m", "gpukit", "report", "--last", "--db", str(db), "-f", "md", "-o", "r.md"],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    md = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "missing_workloads" in md and "mlp-train" in md
