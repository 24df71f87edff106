"""The textfile-collector output: valid for `promtool check metrics`, base units and ratios, one family per metric,
labels escaped, written atomically."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpukit.errors import ConfigError
from gpukit.fleet.prom import TEXTFILE_NAME, check_textfile_dir, figure_metric, render, write_textfile


def _doc(node: str = "gpu-node-1", verdict: str = "slow") -> dict:
    fig = {"value": 761.5, "unit": "TFLOP/s", "status": "ok", "vs_reference": 0.99, "vs_node": 1.0, "vs_fleet": None,
           "flags": []}  # fmt: skip
    slow = {"value": 3800.0, "unit": "GB/s", "status": "ok", "vs_reference": 0.91, "vs_node": 0.92, "flags": ["x"]}
    failed = {"value": None, "unit": "TFLOP/s", "status": "failed", "reason": "check failed"}
    gpu = {"index": 0, "uuid": "GPU-1234", "model": 'NVIDIA "H200"', "verdict": verdict,
           "figures": {"gemm_bf16_tflops": fig, "hbm_copy_gbps": slow, "gemm_fp8_tflops": failed},
           "soak": {"sag": 0.012, "duration_s": 30.2, "trace": [{"t_s": 1.0}]}}  # fmt: skip
    return {"node": {"name": node}, "started_at": "2026-12-01T21:40:00Z", "duration_s": 71.2, "verdict": verdict,
            "gpus": [gpu, {**gpu, "index": 1, "uuid": "GPU-5678", "verdict": "ok"}]}  # fmt: skip


def test_figures_in_base_units_and_ratios() -> None:
    assert figure_metric("gemm_bf16_tflops") == ("gpukit_accept_gemm_bf16_flops_per_second", 1e12)
    assert figure_metric("h2d_pinned_gbps") == ("gpukit_accept_h2d_pinned_bytes_per_second", 1e9)
    assert figure_metric("temperature_c") is None
    text = render([_doc()])
    labels = 'node="gpu-node-1",gpu="0",uuid="GPU-1234",model="NVIDIA \\"H200\\""'
    assert f"gpukit_accept_gemm_bf16_flops_per_second{{{labels}}} 761500000000000.0" in text
    assert f"gpukit_accept_hbm_copy_bytes_per_second{{{labels}}} 3800000000000.0" in text
    assert "gpukit_accept_gemm_fp8_flops_per_second" not in text  # a failed figure has no value, only the flag
    assert f'gpukit_accept_figure_failed{{{labels},figure="gemm_fp8"}} 1.0' in text
    assert f'gpukit_accept_figure_vs_reference_ratio{{{labels},figure="hbm_copy"}} 0.91' in text
    assert f'gpukit_accept_figure_flagged{{{labels},figure="hbm_copy"}} 1.0' in text
    assert 'gpukit_accept_last_run_timestamp_seconds{node="gpu-node-1"} 1796161200.0' in text
    assert f'gpukit_accept_gpu_verdict{{{labels},verdict="slow"}} 1.0' in text
    assert f'gpukit_accept_gpu_verdict{{{labels},verdict="ok"}} 0.0' in text
    assert f"gpukit_accept_soak_sag_ratio{{{labels}}} 0.012" in text


def test_each_family_is_written_once_for_many_nodes() -> None:
    text = render([_doc("a"), _doc("b", "ok")])
    types = [line for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(types) == len(set(types))
    assert text.count("# TYPE gpukit_accept_node_verdict gauge") == 1
    assert 'gpukit_accept_node_verdict{node="b",verdict="ok"} 1.0' in text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_promtool_accepts_the_textfile(tmp_path: Path) -> None:
    path = write_textfile(tmp_path, [_doc("a"), _doc("b", "ok")])
    res = subprocess.run(["promtool", "check", "metrics"], input=path.read_bytes(), capture_output=True, timeout=60)
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
    assert res.stdout.decode().strip() == "" and res.stderr.decode().strip() == ""  # no lint warning either


def test_written_atomically_and_folders_checked_first(tmp_path: Path) -> None:
    (tmp_path / TEXTFILE_NAME).write_text("old\n")
    path = write_textfile(tmp_path, [_doc()])
    assert path == tmp_path / TEXTFILE_NAME and path.read_text().startswith("# HELP")
    assert [p.name for p in tmp_path.iterdir()] == [TEXTFILE_NAME]  # no temporary file left behind
    with pytest.raises(ConfigError, match="no such folder"):
        check_textfile_dir(tmp_path / "missing")
    assert check_textfile_dir(tmp_path) == tmp_path
