"""On a CUDA GPU: `gpukit accept` measures every figure through the bench engine (checked, plausible), soaks with a
per-second trace carrying NVML telemetry, samples NVML at ≥ 1 Hz, runs the node checks, and on a model with a shipped
reference (the H200) passes a healthy GPU with no flag.

Run: ``PYTHONPATH=src python -m pytest tests/gpu/test_accept_gpu.py -m gpu -q`` (about a minute on one H200).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CUDA_FIGURES = {"gemm_bf16_tflops", "gemm_fp8_tflops", "hbm_copy_gbps", "hbm_triad_gbps", "h2d_pinned_gbps",
                "d2h_pinned_gbps", "soak_gemm_tflops"}  # fmt: skip


def test_accept_measures_soaks_watches_and_passes_a_healthy_gpu() -> None:
    from gpukit.fleet.accept import AcceptSettings, run_accept
    from gpukit.fleet.accept_reference import reference_for
    from gpukit.hardware.specs import match_spec

    acc = run_accept(AcceptSettings(soak_s=5))
    assert len(acc.gpus) == torch.cuda.device_count()
    for g in acc.gpus:
        assert set(g.figures) == CUDA_FIGURES
        spec = match_spec(g.model)
        for name, f in g.figures.items():
            if name == "gemm_fp8_tflops" and torch.cuda.get_device_capability(g.index) < (8, 9):
                assert f.status == "skipped" and "sm_89" in (f.reason or "")
                continue
            assert f.status == "ok", (name, f.reason)
            assert f.value is not None and f.value > 0 and f.rel_error is not None
            if spec is not None and name.startswith("gemm_bf16"):
                assert f.value < 1.05 * spec.tflops["bf16"]
        trace = g.soak.trace if g.soak else []
        assert len(trace) >= 5 and all(p.tflops > 0 for p in trace)
        assert any(p.sm_clock_mhz for p in trace) and any(p.power_w for p in trace)  # NVML beside every second
        samples = g.telemetry["samples"]
        assert len(samples) >= acc.duration_s * 1.0 * 0.8  # ≥ 1 Hz over the run (2 Hz asked)
        assert g.telemetry["before"]["reachable"] and g.telemetry["after"]["reachable"]
        assert g.telemetry["after"]["power_limit_w"] == g.telemetry["before"]["power_limit_w"]
        if reference_for(g.model) is not None:
            assert g.verdict == "ok", g.reasons
            assert all(not f.flags for f in g.figures.values())
            assert g.figures["gemm_bf16_tflops"].dcgm_gate is not None
    allreduce = acc.node_checks["allreduce"]
    assert allreduce["status"] == "ok" and allreduce["ranks"] == len(acc.gpus) and allreduce["check"] is True
    p2p = acc.node_checks["p2p"]
    assert p2p["status"] == ("unavailable" if len(acc.gpus) == 1 else "ok")


def test_the_cli_prints_json_saves_and_writes_the_textfile(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "gpukit", "accept", "--json", "--soak-s", "3", "--no-node-checks",
           "--db", str(tmp_path / "h.db"), "--prom-textfile", str(tmp_path)]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    doc = json.loads(res.stdout)
    assert res.returncode == (0 if doc["verdict"] == "ok" else 1), res.stderr
    assert doc["device"] == "cuda" and doc["id"] is not None and doc["duration_s"] < 90
    text = (tmp_path / "gpukit_accept.prom").read_text()
    assert "gpukit_accept_gemm_bf16_flops_per_second{" in text
    if shutil.which("promtool"):
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
