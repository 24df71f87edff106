"""`gpukit info` / `gpukit doctor` in-process: rendering, exit codes (0, 1 on a FAIL, 2 on a bad flag)."""

from __future__ import annotations

import json

import pytest

import gpukit.hardware.doctor as doctor_mod
from gpukit.hardware.facts import Facts
from gpukit.hardware.gpu import GpuInfo


def test_info_human_with_fake_gpus_shows_datasheet(run_cli, fake_nvml):
    fake_nvml.gpus[0].throttle_mask = 0x4
    r = run_cli("info", "--no-probe")
    assert r.exit_code == 0
    assert "GPU 0: NVIDIA H200" in r.stdout and "datasheet" in r.stdout and "NVIDIA H200 SXM" in r.stdout
    assert "sw_power_cap" in r.stdout and "NV18" in r.stdout  # throttle reasons and the topology matrix
    assert "570.86.15" in r.stdout


def test_info_without_gpu_says_so_and_exits_zero(run_cli, no_nvml):
    r = run_cli("info", "--no-probe")
    assert r.exit_code == 0
    assert "GPUs: none" in r.stdout and "NVML" in r.stdout and "CPU" in r.stdout and "Software stack" in r.stdout


def test_info_json(run_cli, no_nvml):
    r = run_cli("info", "--json", "--no-probe")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["gpus"] == [] and doc["gpus_reason"] and doc["cpu"]["threads"] >= 1


@pytest.mark.parametrize("cmd", ["info", "doctor"])
def test_bad_flag_is_usage_error(run_cli, cmd):
    assert run_cli(cmd, "--no-such-flag").exit_code == 2


def test_doctor_exit_codes_follow_fail(run_cli, monkeypatch):
    facts = {"value": Facts()}
    monkeypatch.setattr(doctor_mod, "gather_facts", lambda probe_timeout_s=60.0: facts["value"])
    ok = run_cli("doctor")
    assert ok.exit_code == 0 and "SKIP" in ok.stdout and "0 fail" in ok.stdout

    facts["value"] = Facts(nvml_ok=True, gpus=(GpuInfo(0, "NVIDIA H200"),), cuda_visible_devices="")
    bad = run_cli("doctor")
    assert bad.exit_code == 1
    assert "FAIL" in bad.stdout and "hides all 1" in bad.stdout and "hint:" in bad.stdout

    as_json = run_cli("doctor", "--json")
    assert as_json.exit_code == 1
    doc = json.loads(as_json.stdout)
    assert doc["ok"] is False
    assert any(f["check"] == "cuda_visible_devices" and f["level"] == "FAIL" for f in doc["findings"])
