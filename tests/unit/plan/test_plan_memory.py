"""Memory arithmetic: hand-computed cases, recipes, sharding, KV cache, and H200 measurements as regression points."""

from __future__ import annotations

import dataclasses

import pytest
from h200_models import measured_model

from gpukit.errors import PlanError
from gpukit.plan.memory import PlanSettings, estimate_memory, kv_cache_bytes
from gpukit.plan.models import TransformerSpec, load_model

GiB = 2**30


def llama7() -> TransformerSpec:
    m = load_model("llama-2-7b")
    assert isinstance(m, TransformerSpec)
    return m


def test_7b_fp32_weights_are_28_gb() -> None:
    mem = estimate_memory(load_model(None, "7B"), PlanSettings(task="train", recipe="fp32"))
    assert mem.weights_bytes == 28_000_000_000
    assert mem.gradients_bytes == 28_000_000_000
    assert mem.optimizer_bytes == 56_000_000_000  # two fp32 Adam moments: 16 bytes/param in all


def test_7b_bf16_weights_are_14_gb_not_4_bits() -> None:
    mem = estimate_memory(load_model(None, "7B"), PlanSettings(task="infer", dtype="bf16"))
    assert mem.weights_bytes == 14_000_000_000


def test_llama_2_7b_kv_cache_is_512_kib_per_token() -> None:
    assert kv_cache_bytes(llama7(), batch=1, tokens=1) == 512 * 1024
    mem = estimate_memory(llama7(), PlanSettings(task="infer", batch=2, prompt=100, new_tokens=28))
    assert mem.kv_cache_bytes == 2 * 128 * 512 * 1024
    fp8 = estimate_memory(llama7(), PlanSettings(task="infer", batch=2, prompt=100, new_tokens=28, kv_dtype="fp8"))
    assert fp8.kv_cache_bytes == mem.kv_cache_bytes // 2


@pytest.mark.parametrize(
    ("recipe", "w", "g", "master", "opt"),
    [("fp32", 4, 4, 0, 8), ("amp-bf16", 4, 4, 0, 8), ("bf16-master", 2, 2, 4, 8), ("bf16", 2, 2, 0, 4)],
)
def test_model_state_bytes_per_param(recipe: str, w: int, g: int, master: int, opt: int) -> None:
    n = 1_000_000_000
    mem = estimate_memory(load_model(None, "1B"), PlanSettings(task="train", recipe=recipe))
    assert (mem.weights_bytes, mem.gradients_bytes, mem.master_bytes, mem.optimizer_bytes) == (
        w * n,
        g * n,
        master * n,
        opt * n,
    )


@pytest.mark.parametrize(("opt", "per_param"), [("sgd", 4), ("adam8bit", 2)])
def test_other_optimizers(opt: str, per_param: int) -> None:
    mem = estimate_memory(load_model(None, "1B"), PlanSettings(task="train", recipe="fp32", optimizer=opt))
    assert mem.optimizer_bytes == pytest.approx(per_param * 1e9, rel=0.01)


def test_adafactor_is_factored() -> None:
    mem = estimate_memory(llama7(), PlanSettings(task="train", recipe="fp32", optimizer="adafactor"))
    assert mem.optimizer_bytes < 0.01 * 8 * llama7().params


def test_sharding_arithmetic() -> None:
    m, base = llama7(), PlanSettings(task="train", recipe="bf16-master", gpus=8, batch=1, seq=1024)
    ddp = estimate_memory(m, base)
    z1 = estimate_memory(m, dataclasses.replace(base, shard="zero1"))
    z2 = estimate_memory(m, dataclasses.replace(base, shard="zero2"))
    z3 = estimate_memory(m, dataclasses.replace(base, shard="zero3"))
    fsdp = estimate_memory(m, dataclasses.replace(base, shard="fsdp"))
    p = m.params
    assert ddp.gradients_bytes == 2 * (2 * p)  # gradients + DDP's bucket copy
    assert z1.optimizer_bytes == 8 * p // 8 and z1.master_bytes == 4 * p // 8
    assert z1.gradients_bytes == 2 * p and z1.weights_bytes == 2 * p
    assert z2.gradients_bytes == 2 * p // 8
    # shard + two decoder layers in flight (this one gathered, the next prefetched)
    assert z3.weights_bytes == pytest.approx(2 * p / 8 + 2 * (2 * m.layer_params()), rel=1e-9)
    assert fsdp.weights_bytes == z3.weights_bytes
    assert ddp.total_bytes > z1.total_bytes > z2.total_bytes > z3.total_bytes


def test_tensor_parallel_divides_states_and_checks_heads() -> None:
    m = llama7()
    one = estimate_memory(m, PlanSettings(task="train", recipe="bf16", seq=1024))
    tp4 = estimate_memory(m, PlanSettings(task="train", recipe="bf16", seq=1024, gpus=4, tp=4))
    assert tp4.weights_bytes == one.weights_bytes // 4
    assert tp4.activations_bytes < one.activations_bytes
    with pytest.raises(PlanError, match="does not divide"):
        estimate_memory(m, PlanSettings(task="train", gpus=3, tp=3))
    with pytest.raises(PlanError, match="not a multiple"):
        estimate_memory(m, PlanSettings(task="train", gpus=6, tp=4))


def test_int4_keeps_embeddings_in_16_bit() -> None:
    m = llama7()
    mem = estimate_memory(m, PlanSettings(task="infer", dtype="int4"))
    head = 2 * 32000 * 4096
    assert mem.weights_bytes == int(head * 2 + (m.params - head) * (0.5 + 4 / 128))


def test_activations_scale_and_checkpointing_saves() -> None:
    m = llama7()
    s = PlanSettings(task="train", recipe="bf16", batch=1, seq=2048)
    a1 = estimate_memory(m, s).activations_bytes
    a2 = estimate_memory(m, dataclasses.replace(s, batch=2)).activations_bytes
    ck = estimate_memory(m, dataclasses.replace(s, checkpointing=True)).activations_bytes
    eager = estimate_memory(m, dataclasses.replace(s, attn="eager")).activations_bytes
    assert a2 == pytest.approx(2 * a1, rel=0.01)
    assert ck < a1 / 10
    assert eager > a1


@pytest.mark.parametrize(
    "bad",
    [
        dict(recipe="fp16"),
        dict(optimizer="lion"),
        dict(shard="zero4"),
        dict(batch=0),
        dict(attn="flash3"),
        dict(task="serve"),
        dict(tp=0),
        dict(gpus=0),
    ],
)
def test_bad_settings_raise_plan_error(bad: dict[str, object]) -> None:
    with pytest.raises(PlanError):
        estimate_memory(llama7(), PlanSettings(**bad))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bad", "flag"),
    [(dict(tp=0), "--tp"), (dict(batch=-1), "--batch"), (dict(task="infer", new_tokens=-1), "--new-tokens")],
)
def test_bad_size_names_its_flag(bad: dict[str, object], flag: str) -> None:
    with pytest.raises(PlanError, match=f"{flag} must be"):
        estimate_memory(llama7(), PlanSettings(**bad))  # type: ignore[arg-type]


# Peak allocated memory measured on an NVIDIA H200 (torch 2.11, transformers 5.17; benchmarks/plan_grid_*.md) —
# the planner must stay within ±10 % of these.
MEASURED = [
    ("gpt2", dict(recipe="fp32", batch=8, seq=512), 8.576),
    ("gpt2", dict(recipe="amp-bf16", batch=8, seq=1024), 13.162),
    ("gpt2", dict(recipe="amp-bf16", batch=4, seq=1024, attn="eager"), 11.365),
    ("llama-gqa", dict(recipe="fp32", batch=2, seq=1024), 12.530),
    ("llama-gqa", dict(recipe="bf16", batch=8, seq=1024), 14.304),
    ("llama-gqa", dict(recipe="amp-bf16", batch=4, seq=1024, checkpointing=True), 9.302),
    ("qwen2-0.5b", dict(recipe="amp-bf16", batch=4, seq=1024), 20.767),
    ("qwen2-0.5b", dict(recipe="amp-bf16", batch=2, seq=2048, checkpointing=True), 14.32),  # grid run 1
    ("gpt2-medium", dict(recipe="bf16", batch=8, seq=1024, checkpointing=True), 7.83),  # grid run 1
    ("resnet50", dict(recipe="fp32", batch=32), 2.964),
    ("seed-cnn", dict(recipe="fp32", batch=1024), 1.579),
]


@pytest.mark.parametrize(("name", "kw", "gib"), MEASURED)
def test_h200_measurements_within_ten_percent(name: str, kw: dict[str, object], gib: float) -> None:
    model = measured_model(name)
    pred = estimate_memory(model, PlanSettings(task="train", **kw)).peak_allocated_bytes  # type: ignore[arg-type]
    assert pred / (gib * GiB) == pytest.approx(1.0, abs=0.10)
