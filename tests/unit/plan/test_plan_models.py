"""Architectures: exact parameter counts, config.json parsing (GQA, tied embeddings, MoE, head_dim), bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gpukit.errors import PlanError
from gpukit.plan.models import (
    CNN_PRESETS,
    TRANSFORMER_PRESETS,
    TransformerSpec,
    load_model,
    parse_param_count,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "plan"
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None

# Published totals (model cards / HF safetensors metadata).
KNOWN = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "mistral-7b": 7_241_732_096,
    "qwen2-0.5b": 494_032_768,
    "qwen2-7b": 7_615_616_512,
    "mixtral-8x7b": 46_702_792_704,
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "resnet50": 25_557_032,
}


@pytest.mark.parametrize(("name", "count"), sorted(KNOWN.items()))
def test_preset_parameter_counts_are_exact(name: str, count: int) -> None:
    assert load_model(name).params == count


def test_llama_2_7b_by_the_formula() -> None:
    m = load_model("llama-2-7b")
    assert isinstance(m, TransformerSpec)
    h, i, L, V = 4096, 11008, 32, 32000
    per_layer = 4 * h * h + 3 * h * i + 2 * h
    assert m.params == L * per_layer + 2 * V * h + h == 6_738_415_616


def test_mixtral_active_parameters_count_two_experts() -> None:
    m = load_model("mixtral-8x7b")
    assert m.active_params == 12_879_925_248  # the "12.9B active" of the model card


def test_gqa_config(tmp_path: Path) -> None:
    m = load_model(str(FIXTURES / "gqa_llama" / "config.json"))
    assert isinstance(m, TransformerSpec)
    assert (m.num_heads, m.num_kv_heads, m.head_dim) == (8, 2, 32)
    assert m.params == 1_627_392  # hand count: 2·(attn 163,840 + mlp 393,216 + norms 512) + 2·V·h + h
    assert m.name == "gqa_llama"


def test_config_folder_works_like_the_file() -> None:
    assert load_model(str(FIXTURES / "gqa_llama")).params == 1_627_392


def test_tied_embeddings_and_qkv_bias() -> None:
    m = load_model(str(FIXTURES / "tied_qwen2" / "config.json"))
    assert isinstance(m, TransformerSpec)
    assert m.tied_embeddings and m.qkv_bias
    assert m.params == 745_088


def test_moe_config() -> None:
    m = load_model(str(FIXTURES / "moe_mixtral" / "config.json"))
    assert isinstance(m, TransformerSpec)
    assert (m.num_experts, m.experts_per_token) == (4, 2)
    assert m.params == 1_142_400
    assert m.active_params == 749_184


def test_explicit_head_dim_overrides_hidden_over_heads() -> None:
    m = load_model(str(FIXTURES / "head_dim" / "config.json"))
    assert isinstance(m, TransformerSpec)
    assert m.head_dim == 128 != m.hidden_size // m.num_heads
    assert m.params == 1_955_072


@pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers not installed")
@pytest.mark.parametrize("config", ["gqa_llama", "tied_qwen2", "moe_mixtral", "head_dim"])
def test_counts_match_transformers(config: str) -> None:
    import json

    import torch
    import transformers

    cfg = json.loads((FIXTURES / config / "config.json").read_text())
    spec = load_model(str(FIXTURES / config))
    model_type = cfg.pop("model_type")
    cfg.pop("architectures", None)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(model_type, **cfg))
    assert spec.params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("name", "hint"), [("llama2-7b", "llama-2-7b"), ("gpt-2", "gpt2"), ("mistral7b", "mistral-7b")]
)
def test_unknown_preset_suggests_nearest(name: str, hint: str) -> None:
    with pytest.raises(PlanError) as exc:
        load_model(name)
    assert hint in (exc.value.hint or "")


@pytest.mark.parametrize(
    ("fixture", "message"),
    [("malformed.json", "not valid JSON"), ("incomplete.json", "hidden_size"), ("missing.json", "no such")],
)
def test_bad_config_files(fixture: str, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        load_model(str(FIXTURES / fixture))


def test_heads_not_multiple_of_kv_heads(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(
        '{"model_type": "llama", "vocab_size": 10, "hidden_size": 64, "num_hidden_layers": 1, '
        '"num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 64}'
    )
    with pytest.raises(PlanError, match="multiple of 3 KV heads"):
        load_model(str(bad))


LLAMA_SMALL = {
    "vocab_size": 10,
    "hidden_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "intermediate_size": 64,
}
GPT2_SMALL = {"model_type": "gpt2", "vocab_size": 10, "n_embd": 64, "n_layer": 1, "n_head": 4}


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({**LLAMA_SMALL, "num_local_experts": "many"}, "'num_local_experts' must be a positive integer"),
        ({**LLAMA_SMALL, "num_local_experts": -4}, "'num_local_experts' must be a positive integer"),
        ({**LLAMA_SMALL, "num_local_experts": 4, "num_experts_per_tok": "x"}, "'num_experts_per_tok' must be"),
        ({**LLAMA_SMALL, "num_local_experts": 4, "num_experts_per_tok": 9}, "9 experts per token of 4"),
        ({**GPT2_SMALL, "n_inner": "big"}, "'n_inner' must be a positive integer"),
        ({**GPT2_SMALL, "n_head": 5}, "64 is not divisible by 5 heads"),
        ({**LLAMA_SMALL, "num_attention_heads": 5}, "64 is not divisible by 5 heads"),
    ],
)
def test_bad_config_values_are_plan_errors(tmp_path: Path, cfg: dict[str, object], message: str) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(cfg))
    with pytest.raises(PlanError, match=message):
        load_model(str(bad))


@pytest.mark.parametrize(
    "cfg", [{**LLAMA_SMALL, "model_type": None}, {"text_config": LLAMA_SMALL}, {**LLAMA_SMALL, "head_dim": 8}]
)
def test_missing_model_type_reads_as_llama(tmp_path: Path, cfg: dict[str, object]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = load_model(str(path))
    assert isinstance(spec, TransformerSpec)
    assert spec.family == "llama"


def test_unreadable_config_path_is_a_plan_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "weights.bin"
    not_a_dir.write_text("x")
    with pytest.raises(PlanError, match="cannot read"):
        load_model(str(not_a_dir / "config.json"))


def test_unsupported_model_type(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "t5", "vocab_size": 10, "d_model": 64}')
    with pytest.raises(PlanError, match="not supported"):
        load_model(str(bad))


@pytest.mark.parametrize(
    ("text", "n"), [("7B", 7_000_000_000), ("350m", 350_000_000), ("1.5b", 1_500_000_000), ("124439808", 124_439_808)]
)
def test_param_count_parsing(text: str, n: int) -> None:
    assert parse_param_count(text) == n


@pytest.mark.parametrize("text", ["seven", "7X", "-1B", "0", "9" * 400])
def test_bad_param_counts(text: str) -> None:
    with pytest.raises(PlanError):
        parse_param_count(text)


def test_presets_cover_the_issue() -> None:
    wanted = {
        "llama-2-7b",
        "llama-2-13b",
        "llama-2-70b",
        "llama-3-8b",
        "llama-3-70b",
        "mistral-7b",
        "qwen2-0.5b",
        "qwen2-7b",
        "gpt2",
        "gpt2-medium",
        "gpt2-large",
        "gpt2-xl",
        "mixtral-8x7b",
    }
    assert wanted <= set(TRANSFORMER_PRESETS)
    assert {"resnet50", "seed-cnn"} <= set(CNN_PRESETS)


def _count_cnn(module: object, size: int) -> tuple[int, int]:
    """Parameters and activation elements as the presets count them (max-pool indices twice: int64)."""
    import torch
    import torch.nn as nn

    assert isinstance(module, nn.Module)
    acts = [0]

    def hook(mod: nn.Module, inp: object, out: torch.Tensor) -> None:
        if isinstance(mod, nn.ReLU | nn.Flatten | nn.Identity | nn.Dropout):
            return  # in-place or views: no new storage
        acts[0] += out.numel() * (3 if isinstance(mod, nn.MaxPool2d) else 1)

    for mod in module.modules():
        if not list(mod.children()):
            mod.register_forward_hook(hook)
    x = torch.zeros(1, 3, size, size, device="meta")
    module.to("meta")(x)
    return sum(p.numel() for p in module.parameters()), acts[0] + x.numel()


@pytest.mark.skipif(not HAS_TORCHVISION, reason="torchvision not installed")
def test_cnn_constants_match_the_real_modules() -> None:
    import torchvision

    from gpukit.train.models import seed_cnn

    r, s = CNN_PRESETS["resnet50"], CNN_PRESETS["seed-cnn"]
    assert _count_cnn(torchvision.models.resnet50(), 224) == (r.params, r.act_elems_per_sample)
    assert _count_cnn(seed_cnn(64, 2), 64) == (s.params, s.act_elems_per_sample)
    # the max-pool outputs, whose int64 indices are priced at 8 bytes: ResNet-50's stem pool, the seed CNN's one pool
    assert r.pool_index_elems == 64 * 56 * 56 and s.pool_index_elems == 32 * 31 * 31


@pytest.mark.skipif(not HAS_TORCHVISION, reason="torchvision not installed")
def test_recounting_at_the_presets_own_size_gives_the_preset() -> None:
    from gpukit.plan.cnn_count import count_cnn

    for name in ("resnet50", "seed-cnn"):
        p = CNN_PRESETS[name]
        assert count_cnn(p, p.image_size) == (p.params, p.act_elems_per_sample, p.flops_per_sample, p.pool_index_elems)


def test_a_max_pools_indices_are_eight_bytes_in_every_precision() -> None:
    from dataclasses import replace

    from gpukit.plan.memory import PlanSettings, activation_bytes
    from gpukit.plan.profiles import CNN_PROFILES

    seed = CNN_PRESETS["seed-cnn"]
    for recipe, mode in (("fp32", "fp32"), ("amp-bf16", "amp"), ("bf16", "bf16")):
        s = PlanSettings(recipe=recipe, batch=100)
        with_idx, _, _ = activation_bytes(seed, s)
        without, _, _ = activation_bytes(replace(seed, pool_index_elems=0), s)
        counted = 2 * CNN_PROFILES[mode].bytes_per_elem  # what act_elems already gives each index
        assert with_idx - without == pytest.approx(100 * seed.pool_index_elems * (8 - counted))
