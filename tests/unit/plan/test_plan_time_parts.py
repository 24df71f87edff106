"""The time model's parts, each against a count made by hand, on the synthetic calibration (round numbers)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from gpukit.hardware.specs import get_spec
from gpukit.plan.calibration import interp_rate, load_calibration
from gpukit.plan.compute import estimate_time, layer_gemms, param_tensors
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.models import ModelSpec, load_model
from gpukit.plan.profiles import TIMING

CAL = load_calibration(
    Path(__file__).resolve().parents[2] / "fixtures" / "plan" / "calibration" / "synthetic-h200.json"
)
H200 = get_spec("h200-sxm")


def _phases(model: ModelSpec, s: PlanSettings) -> dict[str, dict[str, float]]:
    t = estimate_time(model, s, estimate_memory(model, s), H200, calibration=CAL)
    return {p["name"]: p for p in t.phases}


def _gemm(flops: float) -> float:
    return flops / (interp_rate(CAL.gemm["bf16"], flops) * 1e12)


def test_llama_forward_gemms_are_counted_per_projection() -> None:
    m = load_model("llama-2-7b")
    tokens = 1024
    by_hand = [2 * tokens * 4096 * 4096] * 4 + [2 * tokens * 11008 * 4096] * 3  # q k v o, gate up down
    assert layer_gemms(m, tokens) == by_hand
    ph = _phases(m, PlanSettings(task="train", recipe="bf16", batch=1, seq=tokens))
    expected = 32 * sum(_gemm(f) for f in by_hand) + _gemm(2 * tokens * 4096 * 32000)
    assert ph["forward"]["gemm_s"] == pytest.approx(expected)
    assert ph["backward"]["gemm_s"] == pytest.approx(2 * expected)  # dgrad + wgrad per forward GEMM


def test_gpt2_fused_qkv_and_tensor_parallel_split() -> None:
    m = load_model("gpt2")
    assert layer_gemms(m, 10) == [2 * 10 * 2304 * 768, 2 * 10 * 768 * 768, 2 * 10 * 3072 * 768, 2 * 10 * 768 * 3072]
    llama = load_model("llama-2-7b")
    assert sum(layer_gemms(llama, 10, tp=4)) == pytest.approx(sum(layer_gemms(llama, 10)) / 4)


def test_checkpointing_recomputes_the_layers_in_the_backward() -> None:
    m = load_model("llama-2-7b")
    s = PlanSettings(task="train", recipe="bf16", batch=1, seq=1024)
    plain, ck = _phases(m, s), _phases(m, dataclasses.replace(s, checkpointing=True))
    head = _gemm(2 * 1024 * 4096 * 32000)
    layers = plain["forward"]["gemm_s"] - head
    assert ck["backward"]["gemm_s"] == pytest.approx(plain["backward"]["gemm_s"] + layers)
    assert ck["backward"]["attention_s"] == pytest.approx(
        plain["backward"]["attention_s"] + plain["forward"]["attention_s"]
    )
    assert ck["backward"]["memory_s"] > plain["backward"]["memory_s"]
    assert ck["forward"]["gemm_s"] == plain["forward"]["gemm_s"]


@pytest.mark.parametrize("variant", ["non-reentrant", "reentrant"])
def test_host_floor_is_the_calibrated_line_of_its_variant(variant: str) -> None:
    m = load_model("qwen2-0.5b")
    s = PlanSettings(task="train", recipe="amp-bf16", batch=1, seq=128, checkpointing=True, checkpoint_variant=variant)
    ph = _phases(m, s)
    fixed, per = CAL.host[f"llama|amp|{variant}"]["backward"]
    assert ph["backward"]["host_s"] == pytest.approx((fixed + 24 * per) * TIMING.host_scale)
    assert ph["forward"]["bound"] == "host"  # 128 tokens: the GPU waits on the host


def test_phase_total_is_max_plus_penalty_times_min() -> None:
    m = load_model("gpt2")
    s = PlanSettings(task="train", recipe="bf16", batch=8, seq=1024)
    t = estimate_time(m, s, estimate_memory(m, s), H200, calibration=CAL)
    for p in t.phases:
        hi, lo = max(p["gpu_s"], p["host_s"]), min(p["gpu_s"], p["host_s"])
        assert p["total_s"] == pytest.approx(hi + TIMING.overlap_penalty * lo)
        assert p["gpu_s"] == pytest.approx(p["gemm_s"] + p["attention_s"] + p["memory_s"])
    assert t.step_s == pytest.approx(sum(p["total_s"] for p in t.phases))
    big = _phases(load_model("llama-2-7b"), PlanSettings(task="train", recipe="bf16", batch=8, seq=2048))
    assert big["forward"]["bound"] == "gemm" and big["backward"]["bound"] == "gemm"


def test_optimizer_by_implementation() -> None:
    m = load_model("qwen2-0.5b")
    s = PlanSettings(task="train", recipe="bf16", batch=1, seq=128)
    opt = {impl: _phases(m, dataclasses.replace(s, optimizer_impl=impl))["optimizer"] for impl in
           ("foreach", "fused", "for-loop")}  # fmt: skip
    n = param_tensors(m)
    row = CAL.optimizer["for-loop"]["bf16"]
    assert opt["for-loop"]["host_s"] == pytest.approx((row["fixed_s"] + n * row["s_per_tensor"]) * TIMING.host_scale)
    assert opt["for-loop"]["bound"] == "host" and opt["for-loop"]["total_s"] > opt["foreach"]["total_s"]
    assert opt["fused"]["memory_s"] == pytest.approx(m.params * CAL.optimizer["fused"]["bf16"]["s_per_param"])


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
@pytest.mark.parametrize("name", ["gpt2", "qwen2-0.5b", "llama-2-7b", "tinyllama-1.1b"])
def test_param_tensor_count_matches_transformers(name: str) -> None:
    import torch
    import transformers

    m = load_model(name)
    cfg = dict(m.hf_config)
    config = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        module = transformers.AutoModelForCausalLM.from_config(config)
    assert param_tensors(m) == len(list(module.parameters()))


def test_cnn_host_floor_and_conv_rate() -> None:
    m = load_model("seed-cnn")
    ph = _phases(m, PlanSettings(task="train", recipe="fp32", batch=32))
    assert ph["forward"]["host_s"] == pytest.approx(CAL.host_cnn["seed-cnn|fp32"]["forward"] * TIMING.host_scale)
    per_layer = m.flops_per_sample * 32 / m.weight_layers
    assert ph["forward"]["gemm_s"] == pytest.approx(
        m.flops_per_sample * 32 / (interp_rate(CAL.conv["tf32"], per_layer) * 1e12)
    )
    assert all(p["bound"] == "host" for p in ph.values())  # the seed CNN's small step is host time


def test_decode_reads_weights_and_kv_once_per_token() -> None:
    m = load_model("llama-2-7b")
    s = PlanSettings(task="infer", batch=4, prompt=512, new_tokens=64)
    mem = estimate_memory(m, s)
    t = estimate_time(m, s, mem, H200, calibration=CAL)
    prefill, token = t.phases
    kv = mem.kv_cache_bytes * (512 + 32) / (512 + 64)
    assert token["memory_s"] == pytest.approx((mem.weights_bytes + 3 * kv) / 3000e9)  # DynamicCache's cat
    assert t.bandwidth_bound_tokens_per_s == pytest.approx(4 * 3000e9 / (mem.weights_bytes + kv))
    fixed, per = CAL.host_decode["llama"]["token"]
    assert token["host_s"] == pytest.approx((fixed + 32 * per) * TIMING.decode_host_scale)
    # eager generate() is host-bound per token on a 7 B model (32 layers × 0.7 ms against 4.5 ms of reading)
    assert token["bound"] == "host" and prefill["bound"] == "gemm"
    assert t.total_s == pytest.approx(prefill["total_s"] + 63 * token["total_s"])
    head = _gemm(2 * 4 * 4096 * 32000)  # generate() computes the logits of the last position only
    assert prefill["gemm_s"] == pytest.approx(32 * sum(_gemm(f) for f in layer_gemms(m, 4 * 512)) + head)


def test_a_calibration_serves_only_its_own_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    m, s = load_model("gpt2"), PlanSettings(task="train", recipe="bf16", batch=8, seq=1024)
    mem = estimate_memory(m, s)
    h100 = estimate_time(m, s, mem, get_spec("h100-sxm"), calibration=CAL)
    assert not h100.calibrated and "datasheet" in h100.ceilings_source
    assert estimate_time(m, s, mem, H200, calibration=CAL).calibrated
