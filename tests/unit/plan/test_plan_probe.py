"""`plan --probe-host` (plan/probe.py): the shrunk model keeps the real one's structure, the probe runs end to end on
the CPU stand-in, its host floor replaces the calibration's phase by phase, and the CLI refuses it without a GPU or
for a CNN."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import gpukit.plan
from gpukit.hardware.specs import get_spec
from gpukit.plan.compute import estimate_time
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.models import TransformerSpec, load_model
from gpukit.plan.probe import shrink

HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


@pytest.mark.parametrize("name", ["gpt2", "qwen2-0.5b", "tinyllama-1.1b", "llama-2-7b"])
def test_shrink_keeps_depth_head_size_and_sharing(name: str) -> None:
    real = load_model(name)
    assert isinstance(real, TransformerSpec)
    small = shrink(real, positions=4096)
    assert small.num_layers == real.num_layers and small.family == real.family
    assert small.head_dim == real.head_dim and small.num_heads == 4 and small.vocab_size == 256
    assert small.hidden_size == 4 * real.head_dim and small.intermediate_size == 2 * small.hidden_size
    assert (small.num_kv_heads < small.num_heads) == (real.num_kv_heads < real.num_heads)  # GQA stays GQA
    assert small.tied_embeddings == real.tied_embeddings and small.layernorm == real.layernorm
    assert small.qkv_bias == real.qkv_bias and small.learned_positions == real.learned_positions
    cfg = small.hf_config
    assert cfg["model_type"] == real.hf_config["model_type"]
    layers = cfg.get("n_layer", cfg.get("num_hidden_layers"))
    assert layers == real.num_layers
    assert cfg.get("n_positions", cfg.get("max_position_embeddings")) >= 4096
    assert cfg.get("n_inner", cfg.get("intermediate_size")) == small.intermediate_size
    assert small.params < real.params / 15  # a few percent of the width: the GPU has little to do
    assert shrink(real, 4096, head_dim=16).hidden_size == 64


def test_probed_host_replaces_the_calibrations_phase_by_phase() -> None:
    model, s, spec = load_model("gpt2"), PlanSettings(batch=4, seq=512), get_spec("h200-sxm")
    mem = estimate_memory(model, s)
    base = estimate_time(model, s, mem, spec)
    probed = estimate_time(model, s, mem, spec, host={"forward": 0.5})
    by = {p["name"]: p for p in probed.phases}
    was = {p["name"]: p for p in base.phases}
    assert by["forward"]["bound"] == "host" and by["forward"]["host_s"] == pytest.approx(0.5 * 1.03, rel=0.01)
    assert by["forward"]["gpu_s"] == was["forward"]["gpu_s"]  # the GPU side is the model's, untouched
    assert by["backward"] == was["backward"] and by["optimizer"] == was["optimizer"]
    assert probed.step_s == pytest.approx(base.step_s - was["forward"]["total_s"] + by["forward"]["total_s"])
    assert "host floor probed on this machine" in probed.ceilings_source
    assert "probed" not in base.ceilings_source
    infer = PlanSettings(task="infer", batch=1, prompt=128, new_tokens=32)
    mem_i = estimate_memory(model, infer)
    slow = estimate_time(model, infer, mem_i, spec, host={"prefill": 0.01, "decode_token": 0.1})
    assert slow.per_token_s is not None and slow.per_token_s >= 0.1
    assert slow.total_s == pytest.approx(slow.prefill_s + 31 * slow.per_token_s)


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
@pytest.mark.parametrize(
    ("name", "kw", "phases"),
    [
        ("gpt2", {"recipe": "fp32", "batch": 2, "seq": 32}, ("forward", "backward", "optimizer")),
        (
            "qwen2-0.5b",
            {"recipe": "bf16", "batch": 1, "seq": 32, "checkpointing": True, "checkpoint_variant": "reentrant"},
            ("forward", "backward", "optimizer"),
        ),
        ("tinyllama-1.1b", {"task": "infer", "batch": 1, "prompt": 16, "new_tokens": 4}, ("prefill", "decode_token")),
    ],
)
def test_probe_runs_on_the_cpu_stand_in(name: str, kw: dict[str, Any], phases: tuple[str, ...]) -> None:
    pytest.importorskip("torch")
    from gpukit.plan.probe import probe_host

    got = probe_host(load_model(name), PlanSettings(**kw), device="cpu", reps=3, warm=1)  # warm: a first call is slow
    assert tuple(got) == phases and all(v > 0 for v in got.values())


def test_probe_refuses_what_it_cannot_time() -> None:
    pytest.importorskip("torch")
    from gpukit.errors import PlanError
    from gpukit.plan.probe import probe_host

    with pytest.raises(PlanError, match="one GPU"):
        probe_host(load_model("gpt2"), PlanSettings(seq=128, gpus=2), device="cpu")
    with pytest.raises(PlanError, match="a CNN's is the calibration's"):
        probe_host(load_model("resnet50"), PlanSettings(batch=8), device="cpu")
    with pytest.raises(PlanError, match="a model it can build"):
        probe_host(load_model(None, "7B"), PlanSettings(), device="cpu")


def test_cli_probe_host_without_a_gpu_is_a_clear_error(run_cli: Any) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the probe would run")
    r = run_cli("plan", "gpt2", "--seq", "256", "--probe-host")
    assert r.exit_code == 2 and "error: --probe-host" in r.stderr and "hint:" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_probe_host_is_for_training(run_cli: Any) -> None:
    r = run_cli("plan", "gpt2", "--task", "infer", "--prompt", "128", "--probe-host")
    assert r.exit_code == 2 and "times a training step" in r.stderr and "hint:" in r.stderr


def test_plan_refuses_a_sequence_past_learned_positions(run_cli: Any) -> None:
    r = run_cli("plan", "gpt2-medium", "--seq", "4096")
    assert r.exit_code == 2 and "past gpt2-medium's 1,024 learned positions" in r.stderr and "hint:" in r.stderr
    r = run_cli("plan", "gpt2", "--task", "infer", "--prompt", "1000", "--new-tokens", "100")
    assert r.exit_code == 2 and "--prompt + --new-tokens 1,100" in r.stderr
    ok = json.loads(run_cli("plan", "gpt2", "--json").stdout)  # no --seq: the model's 1024, not 2048
    assert ok["settings"]["seq"] == 1024
    rope = json.loads(run_cli("plan", "tinyllama-1.1b", "--seq", "8192", "--json").stdout)  # RoPE: no table
    assert rope["settings"]["seq"] == 8192


def test_cli_probe_host_feeds_the_headline_time(run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wiring, with the probe itself stubbed (it needs a GPU): its seconds reach the headline time on this
    machine's GPU, the time's source and a note say so, and the JSON carries what was probed."""
    from gpukit.plan import probe

    seen: list[tuple[str, int]] = []

    def fake(model: Any, s: PlanSettings) -> dict[str, float]:
        seen.append((model.name, s.seq))
        return {"forward": 0.2, "backward": 0.3, "optimizer": 0.01}

    monkeypatch.setattr(probe, "probe_host", fake)
    monkeypatch.setattr(probe, "local_gpu_key", lambda: "h200-sxm")
    args = ("plan", "gpt2", "--batch", "4", "--seq", "512", "--json")
    plain = json.loads(run_cli(*args).stdout)
    got = json.loads(run_cli(*args, "--probe-host").stdout)
    assert seen == [("gpt2", 512)]
    assert got["host_probe_s"] == {"forward": 0.2, "backward": 0.3, "optimizer": 0.01}
    assert got["time"]["gpu"] == "h200-sxm" and "host floor probed on this machine" in got["time"]["ceilings_source"]
    assert any(n.startswith("host floor probed on this machine (forward 200.0 ms") for n in got["memory_notes"])
    assert got["time"]["step_s"] > 0.5 > plain["time"]["step_s"]  # 0.51 s of probed host against ~tens of ms
    host = {p["name"]: p["host_s"] for p in got["time"]["phases"]}
    assert host["forward"] == pytest.approx(0.2 * 1.03, rel=0.01)
    shipped = json.loads((Path(gpukit.plan.__file__).parent / "data" / "time_accuracy.json").read_text())["probed"]
    assert shipped["train"]["n"] == 46  # the 46 held-out rows of four H100 hosts (plan-probe_h100_2026-12-05.md)
    assert got["time"]["accuracy"]["probed"] is True and got["time"]["accuracy"]["n"] == shipped["train"]["n"]
    monkeypatch.setenv("COLUMNS", "400")
    text = " ".join(run_cli(*args[:-1], "--probe-host").stdout.split())
    assert "measured accuracy: step time with the host floor probed on the machine was off by 8% at the median" in text
    other = run_cli(*args, "--probe-host", "--gpu", "a100-80gb")  # another machine's host: not what was probed
    assert other.exit_code == 2 and "is not this machine's GPU (h200-sxm)" in other.stderr and "hint:" in other.stderr
    assert seen == [("gpt2", 512)] * 2  # refused before probing
