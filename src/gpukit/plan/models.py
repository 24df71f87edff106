"""Model architectures for the planner: presets, a Hugging Face ``config.json`` reader and exact parameter counts.

A transformer is described by the handful of numbers its memory and FLOPs depend on (layers ``L``, hidden ``h``,
query heads ``a``, KV heads ``k``, head dim ``d``, FFN size ``i``, vocabulary ``V``); a CNN by its parameter count
and the activation elements one sample keeps for backward (counted once, from the real torch module, and pinned by
a test). Presets are Hugging Face configs, so one parser serves both.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpukit.errors import PlanError

__all__ = ["CnnSpec", "ModelSpec", "TransformerSpec", "load_model", "parse_hf_config", "preset_names"]

# Families whose decoder layer is the Llama shape: RMSNorm, RoPE, (optionally gated) MLP, separate q/k/v.
LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "gemma", "phi3")


@dataclass(frozen=True)
class TransformerSpec:
    name: str
    family: str  # activation-profile family: llama, qwen2, mistral, mixtral, gpt2, …
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    layernorm: bool = False  # LayerNorm (weight + bias) instead of RMSNorm (weight only)
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    num_experts: int = 1
    experts_per_token: int = 1
    learned_positions: int = 0  # GPT-2's position table rows; 0 for RoPE
    hf_config: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    kind = "transformer"

    # --- parameter counts (exact for the HF implementations of these families) ---
    def attention_params(self) -> int:
        h, a, k, d = self.hidden_size, self.num_heads, self.num_kv_heads, self.head_dim
        n = h * a * d + 2 * h * k * d + a * d * h
        if self.qkv_bias:
            n += a * d + 2 * k * d
        if self.out_bias:
            n += h
        return n

    def expert_params(self) -> int:
        """One MLP (one expert of a MoE layer)."""
        h, i = self.hidden_size, self.intermediate_size
        n = (3 if self.gated_mlp else 2) * h * i
        if self.mlp_bias:
            n += (2 if self.gated_mlp else 1) * i + h
        return n

    def layer_params(self) -> int:
        h = self.hidden_size
        norms = (4 if self.layernorm else 2) * h
        router = h * self.num_experts if self.num_experts > 1 else 0
        return self.attention_params() + self.num_experts * self.expert_params() + router + norms

    def embedding_params(self) -> int:
        """Input embeddings, position table, final norm and (when untied) the output head."""
        h, v = self.hidden_size, self.vocab_size
        n = v * h + self.learned_positions * h + (2 if self.layernorm else 1) * h
        return n if self.tied_embeddings else n + v * h

    @property
    def params(self) -> int:
        return self.num_layers * self.layer_params() + self.embedding_params()

    @property
    def active_params(self) -> int:
        """Parameters one token touches (MoE: only its top-k experts) — what FLOPs count."""
        idle = (self.num_experts - self.experts_per_token) * self.expert_params()
        return self.params - self.num_layers * idle

    @property
    def head_params(self) -> int:
        """Embedding and output head, which 8/4-bit schemes usually keep in 16-bit."""
        h, v = self.hidden_size, self.vocab_size
        return v * h * (1 if self.tied_embeddings else 2) + self.learned_positions * h

    def matrix_shapes(self) -> list[tuple[int, int, int]]:
        """(rows, cols, count) of the 2-D weights: Adafactor factors these."""
        h, a, k, d, i, L = (
            self.hidden_size,
            self.num_heads,
            self.num_kv_heads,
            self.head_dim,
            self.intermediate_size,
            self.num_layers,
        )
        mlp = [(i, h, L * self.num_experts * (2 if self.gated_mlp else 1)), (h, i, L * self.num_experts)]
        heads = [(self.vocab_size, h, 1 if self.tied_embeddings else 2)]
        return [(a * d, h, L), (k * d, h, 2 * L), (h, a * d, L), *mlp, *heads]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "family": self.family,
            "layers": self.num_layers,
            "hidden": self.hidden_size,
            "heads": self.num_heads,
            "kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "ffn": self.intermediate_size,
            "vocab": self.vocab_size,
            "gated_mlp": self.gated_mlp,
            "tied_embeddings": self.tied_embeddings,
            "experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
        }


@dataclass(frozen=True)
class CnnSpec:
    name: str
    family: str  # cnn
    params: int
    image_size: int
    num_classes: int
    act_elems_per_sample: int  # input + leaf-module outputs (max-pool indices count twice: int64), see tests
    flops_per_sample: int  # forward multiply-adds × 2 for one sample
    builder: str  # torchvision:resnet50 | gpukit:seed_cnn
    weight_layers: int = 0  # conv + linear layers (host launch cost)
    backward_extra: float | None = None  # measured backward-peak excess, when the profile's does not fit this net
    param_tensors: int = 0  # parameter tensors (the optimizer's per-tensor host cost); 0: two per weight layer
    pool_index_elems: int = 0  # max-pool outputs per sample, whose int64 indices are kept for backward

    kind = "cnn"

    @property
    def active_params(self) -> int:
        return self.params

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "family": self.family,
            "image_size": self.image_size,
            "classes": self.num_classes,
            "act_elems_per_sample": self.act_elems_per_sample,
        }


ModelSpec = TransformerSpec | CnnSpec


def _llama(v: int, h: int, layers: int, a: int, k: int, i: int, **extra: Any) -> dict[str, Any]:
    cfg = {
        "model_type": "llama",
        "vocab_size": v,
        "hidden_size": h,
        "num_hidden_layers": layers,
        "num_attention_heads": a,
        "num_key_value_heads": k,
        "intermediate_size": i,
        "tie_word_embeddings": False,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
    }
    cfg.update(extra)
    return cfg


def _gpt2(h: int, layers: int, a: int) -> dict[str, Any]:
    return {
        "model_type": "gpt2",
        "vocab_size": 50257,
        "n_embd": h,
        "n_layer": layers,
        "n_head": a,
        "n_positions": 1024,
        "tie_word_embeddings": True,
    }


# Published configs (Hugging Face hub config.json of each model), reduced to the fields the planner reads.
TRANSFORMER_PRESETS: dict[str, dict[str, Any]] = {
    "llama-2-7b": _llama(32000, 4096, 32, 32, 32, 11008),
    "llama-2-13b": _llama(32000, 5120, 40, 40, 40, 13824),
    "llama-2-70b": _llama(32000, 8192, 80, 64, 8, 28672),
    "llama-3-8b": _llama(128256, 4096, 32, 32, 8, 14336, max_position_embeddings=8192, rope_theta=500000.0),
    "llama-3-70b": _llama(128256, 8192, 80, 64, 8, 28672, max_position_embeddings=8192, rope_theta=500000.0),
    "tinyllama-1.1b": _llama(32000, 2048, 22, 32, 4, 5632),
    "mistral-7b": _llama(32000, 4096, 32, 32, 8, 14336, model_type="mistral", max_position_embeddings=32768),
    "qwen2-0.5b": _llama(
        151936,
        896,
        24,
        14,
        2,
        4864,
        model_type="qwen2",
        tie_word_embeddings=True,
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
    ),
    "qwen2-7b": _llama(
        152064, 3584, 28, 28, 4, 18944, model_type="qwen2", max_position_embeddings=32768, rms_norm_eps=1e-6
    ),
    "mixtral-8x7b": _llama(
        32000,
        4096,
        32,
        32,
        8,
        14336,
        model_type="mixtral",
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=32768,
    ),
    "gpt2": _gpt2(768, 12, 12),
    "gpt2-medium": _gpt2(1024, 24, 16),
    "gpt2-large": _gpt2(1280, 36, 20),
    "gpt2-xl": _gpt2(1600, 48, 25),
}

# CNN constants counted from the torch modules (tests/unit/plan/test_models.py re-counts them when torch is here).
CNN_PRESETS: dict[str, CnnSpec] = {
    "resnet50": CnnSpec(
        "resnet50",
        "cnn",
        25_557_032,
        224,
        1000,
        22_983_656,
        8_178_368_512,
        "torchvision:resnet50",
        54,
        param_tensors=161,
        pool_index_elems=200_704,
    ),
    "seed-cnn": CnnSpec(
        "seed-cnn", "cnn", 3_937_409, 64, 2, 227_681, 14_515_200, "gpukit:seed_cnn", 3, 0.75, 6, pool_index_elems=30_752
    ),
}


def preset_names() -> list[str]:
    return sorted([*TRANSFORMER_PRESETS, *CNN_PRESETS])


def _get(cfg: dict[str, Any], *keys: str, default: Any = None, required: bool = True, src: str = "") -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    if required and default is None:
        raise PlanError(
            f"config{src} has no '{keys[0]}'",
            hint=f"a decoder config.json needs {keys[0]} (or one of {', '.join(keys[1:]) or 'its aliases'})",
        )
    return default


# Physically meaningful upper bounds for a config's sizes. The largest published models stay far below them
# (hidden ≤ 25,600, ≤ 160 layers, vocab ≤ 262,144, ≤ 256 experts), so a value above one is a typo or an attack, and
# refusing it keeps every later product finite (10²⁰⁰ overflowed a float; a 5,000-digit int could not be parsed).
LIMITS: dict[str, int] = {
    "hidden_size": 2**18,
    "num_hidden_layers": 10_000,
    "num_attention_heads": 2**14,
    "num_key_value_heads": 2**14,
    "head_dim": 2**14,
    "intermediate_size": 2**20,
    "vocab_size": 2**24,
    "n_positions": 2**24,
    "num_local_experts": 2**14,
    "num_experts_per_tok": 2**14,
}
_ALIASES = {"n_embd": "hidden_size", "d_model": "hidden_size", "n_layer": "num_hidden_layers"}
_ALIASES |= {"n_layers": "num_hidden_layers", "n_head": "num_attention_heads", "n_heads": "num_attention_heads"}
_ALIASES |= {"n_inner": "intermediate_size", "num_experts": "num_local_experts"}


def _positive_int(value: Any, key: str, src: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise PlanError(
            f"config{src}: '{key}' must be a positive integer, got {shown}",
            hint='a Hugging Face config.json writes sizes as JSON integers, e.g. 4096 (not "4096", 0 or 4096.5)',
        )
    limit = LIMITS.get(_ALIASES.get(key, key))
    if limit is not None and value > limit:
        shown = f"{value:,}" if value < 10**30 else f"a {len(str(value))}-digit number"
        raise PlanError(
            f"config{src}: '{key}' is {shown}, above the physically meaningful {limit:,}",
            hint="the largest published models are far below this bound; check the config for a typo",
        )
    return value


def _optional_int(cfg: dict[str, Any], key: str, default: int, src: str) -> int:
    """An optional size: absent or null means ``default``; present, it must be a positive integer (0 is an error,
    not a request for the default — a config with ``head_dim: 0`` is broken, not unspecified)."""
    return default if cfg.get(key) is None else _positive_int(cfg[key], key, src)


def _flag(cfg: dict[str, Any], key: str, default: bool, src: str) -> bool:
    """A JSON boolean; the string "false" is truthy in Python, so a wrong type is an error, never a guess."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PlanError(
            f"config{src}: '{key}' must be true or false, got {value!r}",
            hint=f'write it as a JSON boolean: "{key}": {str(default).lower()} (no quotes)',
        )
    return value


def _head_dim(hidden: int, heads: int, src: str) -> int:
    if hidden % heads:
        raise PlanError(
            f"config{src}: hidden size {hidden} is not divisible by {heads} heads",
            hint="check the head count (llama-like configs may set head_dim)",
        )
    return hidden // heads


def _experts(cfg: dict[str, Any], src: str) -> tuple[int, int]:
    """(experts, experts per token); a dense model is (1, 1)."""
    key = "num_local_experts" if cfg.get("num_local_experts") is not None else "num_experts"
    experts = _optional_int(cfg, key, 1, src)
    if experts == 1:
        return 1, 1
    per_token = _optional_int(cfg, "num_experts_per_tok", 1, src)
    if per_token > experts:
        raise PlanError(f"config{src}: {per_token} experts per token of {experts} experts")
    return experts, per_token


def parse_hf_config(cfg: dict[str, Any], name: str = "config", src: str = "") -> TransformerSpec:
    """A TransformerSpec from a Hugging Face config dict (llama, mistral, qwen2/3, mixtral, gemma, gpt2 shapes)."""
    if not isinstance(cfg, dict):
        raise PlanError(f"config{src} is not a JSON object")
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):  # multimodal wrappers
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    raw_type = cfg.get("model_type")
    if raw_type is not None and not isinstance(raw_type, str):
        raise PlanError(f"config{src}: 'model_type' must be a string, got {raw_type!r}", hint='e.g. "llama"')
    model_type = (raw_type or "").lower()  # absent or null: read as llama
    if model_type == "gpt2":
        h = _positive_int(_get(cfg, "n_embd", "hidden_size", src=src), "n_embd", src)
        spec = TransformerSpec(
            name=name,
            family="gpt2",
            vocab_size=_positive_int(_get(cfg, "vocab_size", src=src), "vocab_size", src),
            hidden_size=h,
            num_layers=_positive_int(_get(cfg, "n_layer", "num_hidden_layers", src=src), "n_layer", src),
            num_heads=(a := _positive_int(_get(cfg, "n_head", "num_attention_heads", src=src), "n_head", src)),
            num_kv_heads=a,
            head_dim=_head_dim(h, a, src),
            intermediate_size=_optional_int(cfg, "n_inner", 4 * h, src),
            gated_mlp=False,
            tied_embeddings=_flag(cfg, "tie_word_embeddings", True, src),
            layernorm=True,
            qkv_bias=True,
            out_bias=True,
            mlp_bias=True,
            learned_positions=_positive_int(_get(cfg, "n_positions", default=1024, src=src), "n_positions", src),
            hf_config=cfg,
        )
    else:
        if model_type and model_type not in LLAMA_LIKE:
            raise PlanError(
                f"config{src}: model_type '{model_type}' is not supported",
                hint=f"supported: gpt2, {', '.join(LLAMA_LIKE)}; or give --params",
            )
        h = _positive_int(_get(cfg, "hidden_size", "d_model", src=src), "hidden_size", src)
        a = _positive_int(_get(cfg, "num_attention_heads", "n_heads", src=src), "num_attention_heads", src)
        k = _optional_int(cfg, "num_key_value_heads", a, src)
        if a % k:
            raise PlanError(f"config{src}: {a} attention heads are not a multiple of {k} KV heads")
        d = _positive_int(cfg["head_dim"], "head_dim", src) if cfg.get("head_dim") is not None else _head_dim(h, a, src)
        experts, per_token = _experts(cfg, src)
        spec = TransformerSpec(
            name=name,
            family=model_type or "llama",
            vocab_size=_positive_int(_get(cfg, "vocab_size", src=src), "vocab_size", src),
            hidden_size=h,
            num_layers=_positive_int(_get(cfg, "num_hidden_layers", "n_layers", src=src), "num_hidden_layers", src),
            num_heads=a,
            num_kv_heads=k,
            head_dim=d,
            intermediate_size=_positive_int(_get(cfg, "intermediate_size", src=src), "intermediate_size", src),
            gated_mlp=True,
            tied_embeddings=_flag(cfg, "tie_word_embeddings", False, src),
            qkv_bias=_flag(cfg, "attention_bias", model_type == "qwen2", src),
            out_bias=_flag(cfg, "attention_bias", False, src),
            mlp_bias=_flag(cfg, "mlp_bias", False, src),
            num_experts=experts,
            experts_per_token=per_token,
            hf_config=cfg,
        )
    return spec


def _read_config(path: Path) -> dict[str, Any]:
    if path.is_dir():
        path = path / "config.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PlanError(f"no such config file: {path}") from exc
    except OSError as exc:  # a directory in the way, no permission
        raise PlanError(f"cannot read {path}: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path} is not valid JSON: {exc}", hint="give a Hugging Face config.json") from exc
    except (ValueError, RecursionError) as exc:  # an integer of more than 4,300 digits; nesting too deep
        raise PlanError(
            f"{path} cannot be read as a config: {str(exc).splitlines()[0][:120]}",
            hint="a config.json's sizes are ordinary integers (a few digits), not thousands of digits",
        ) from exc
    if not isinstance(doc, dict):
        raise PlanError(f"{path} is not a JSON object", hint="give a Hugging Face config.json")
    return doc


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmbt]?)\s*$", re.IGNORECASE)


def parse_param_count(text: str, flag: str = "--params") -> int:
    """``7B`` → 7_000_000_000; ``350M``, ``1.5b``, ``124439808`` also work. ``flag`` names the option in errors."""
    m = _SIZE.match(text)
    if not m:
        raise PlanError(f"{flag} '{text}' is not a size", hint="write it like 7B, 350M or 124439808")
    scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[m.group(2).lower()]
    value = float(m.group(1)) * scale
    if not math.isfinite(value):  # 400 digits overflow a float
        raise PlanError(f"{flag} '{text}' is too large", hint="write it like 7B, 350M or 124439808")
    n = round(value)
    if n <= 0:
        raise PlanError(f"{flag} '{text}' must be positive")
    return n


def params_only(count: int) -> CnnSpec:
    """A bare parameter count (``--params 7B``): model states and weights only; no activation model."""
    return CnnSpec(f"{count:,} params", "params-only", count, 0, 0, 0, 0, "none")


def load_model(model: str | None, params: str | None = None) -> ModelSpec:
    """Resolve MODEL: a preset name, a path to config.json (or its folder), or ``--params``."""
    if params and model:  # one would be silently ignored
        raise PlanError(
            f"give MODEL or --params, not both ('{model}' and --params {params})",
            hint="a preset or config.json models activations and time; --params counts model states only",
        )
    if params:
        return params_only(parse_param_count(params))
    if not model:
        raise PlanError("no model given", hint="give a preset (e.g. llama-2-7b), a config.json path, or --params 7B")
    key = model.lower()
    if key in TRANSFORMER_PRESETS:
        return parse_hf_config(TRANSFORMER_PRESETS[key], name=key)
    if key in CNN_PRESETS:
        return CNN_PRESETS[key]
    path = Path(model).expanduser()
    if path.exists() or model.endswith(".json") or "/" in model:
        return parse_hf_config(
            _read_config(path), name=path.parent.name if path.is_file() else path.name, src=f" {path}"
        )
    near = difflib.get_close_matches(key, preset_names(), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(near)}?" if near else f"known presets: {', '.join(preset_names())}"
    raise PlanError(f"unknown model '{model}' (not a preset, not a file)", hint=hint)
