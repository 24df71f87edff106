"""`gpukit accept --device cpu`: every part but the GPU figures, for real — the bench engine's CPU figures, the
soak and its trace, the gloo all-reduce, the verdicts, the history, the textfile — and the bad-input paths."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gpukit.history import open_history


def _err(res) -> str:
    return " ".join(res.stderr.split())  # rich wraps long lines at the terminal's width


def test_accept_on_the_cpu_measures_judges_saves_and_exports(run_cli, tmp_path: Path) -> None:
    db, prom = tmp_path / "h.db", tmp_path / "prom"
    prom.mkdir()
    res = run_cli("accept", "--device", "cpu", "--soak-s", "3", "--db", str(db), "--prom-textfile", str(prom),
                  "--node", "ci-node", "--json")  # fmt: skip
    doc = json.loads(res.stdout)
    assert res.exit_code == (0 if doc["verdict"] == "ok" else 1), res.stderr
    assert "Traceback" not in res.stderr and "soak: 3 s" in res.stderr  # progress lines on stderr, JSON on stdout
    assert doc["kind"] == "gpukit-accept" and doc["device"] == "cpu" and doc["node"]["name"] == "ci-node"
    (gpu,) = doc["gpus"]
    figures = gpu["figures"]
    assert set(figures) == {"gemm_fp32_tflops", "mem_copy_gbps", "mem_triad_gbps", "soak_gemm_tflops"}
    for name, fig in figures.items():
        assert fig["status"] == "ok" and fig["value"] > 0, (name, fig)
        assert fig["rel_error"] is not None and fig["rel_error"] <= 2e-5, name  # checked like every bench row
    assert figures["mem_copy_gbps"]["rel_error"] == 0.0  # a copy is exact
    soak = gpu["soak"]
    assert soak["status"] == "ok" and len(soak["trace"]) >= 3 and soak["sag"] is not None
    assert all(p["tflops"] > 0 for p in soak["trace"])
    assert (gpu["verdict"] == "ok") == (not gpu["reasons"])
    allreduce = doc["node_checks"]["allreduce"]
    assert allreduce["status"] == "ok" and allreduce["ranks"] == 2 and allreduce["check"] is True
    assert doc["node_checks"]["p2p"]["status"] == "unavailable"
    assert any("no node median" in r for r in doc["reasons"])
    with open_history(db, create=False) as h:
        (saved,) = h.acceptances()
    assert saved["id"] == doc["id"] and saved["started_at"] == doc["started_at"] and saved["node"]["name"] == "ci-node"
    text = (prom / "gpukit_accept.prom").read_text()
    assert 'gpukit_accept_mem_copy_bytes_per_second{node="ci-node",gpu="0"' in text
    if shutil.which("promtool"):
        check = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr


def test_without_a_gpu_it_says_so_and_exits_2(run_cli, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    res = run_cli("accept", "--db", str(tmp_path / "h.db"))
    assert res.exit_code == 2 and "no CUDA GPU" in _err(res) and "--device cpu" in _err(res)
    assert "Traceback" not in res.stderr


def test_bad_input_is_refused_before_anything_is_measured(run_cli, tmp_path: Path) -> None:
    res = run_cli("accept", "--device", "cpu", "--prom-textfile", str(tmp_path / "nope"), "--db", str(tmp_path / "d"))
    assert res.exit_code == 2 and "no such folder" in _err(res) and "hint:" in _err(res)
    res = run_cli("accept", "--device", "cpu", "--soak-s", "0.5", "--no-save")
    assert res.exit_code == 2 and "--soak-s" in _err(res)
    res = run_cli("accept", "--device", "gpu", "--no-save")
    assert res.exit_code == 2 and "unknown device" in _err(res)


def test_a_store_that_refuses_the_run_keeps_it_as_json(run_cli, tmp_path: Path, monkeypatch) -> None:
    from gpukit.errors import StoreError
    from gpukit.fleet import accept as accept_mod
    from gpukit.fleet.record import Acceptance, Figure, GpuAcceptance
    from gpukit.history import History

    def fake_run(settings, **kw):
        gpu = GpuAcceptance(0, None, "CPU", figures={"mem_copy_gbps": Figure(10.0, "GB/s")})
        return Acceptance("2026-12-01T21:00:00Z", {"name": "n1", "gpus": []}, "cpu", gpus=[gpu], duration_s=1.0)

    def refuse(self, record):
        raise StoreError("database or disk is full")

    monkeypatch.setattr(accept_mod, "run_accept", fake_run)
    monkeypatch.setattr(History, "save_acceptance", refuse)
    res = run_cli("accept", "--device", "cpu", "--db", str(tmp_path / "h.db"))
    assert res.exit_code == 0 and "disk is full" in _err(res) and "gpukit history import" in _err(res)
    (kept,) = tmp_path.glob("h.db.unsaved-*-acceptance.json")
    saved = json.loads(kept.read_text())
    assert saved["kind"] == "acceptance" and saved["record"]["gpus"][0]["figures"]["mem_copy_gbps"]["value"] == 10.0
    monkeypatch.undo()
    imported = run_cli("history", "import", str(kept), "--db", str(tmp_path / "h.db"), "--json")
    assert imported.exit_code == 0, imported.stderr
    with open_history(tmp_path / "h.db", create=False) as h:
        assert [a["started_at"] for a in h.acceptances()] == ["2026-12-01T21:00:00Z"]
