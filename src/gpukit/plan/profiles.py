"""Activation profiles: what autograd keeps per layer, per model family and precision mode.

Each coefficient is bytes per element of a per-layer tensor shape: ``per_h`` × (s·b·h), ``per_i`` × (s·b·i),
``per_kv`` × (s·b·k·d); ``eager_scores`` × (a·s²·b) only with eager attention. They are counted from the Hugging Face
code path (RMSNorm upcasts, RoPE, SDPA saving q/k/v/out, gated MLP keeping gate/act/up/product; GPT-2's python
tanh-GELU keeping four tensors) and then scaled by ``scale``, a per-family factor fitted to measured peaks on an H200
(``benchmarks/scripts/plan_grid.py``; docs/plan.md says how to refit it). Modes: ``fp32`` (everything fp32), ``amp``
(fp32 weights, bf16 autocast: the residual stream and norms stay fp32, matmul inputs are cast to bf16),
``bf16`` (bf16 weights and activations; also bf16-master).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROFILES", "ActivationProfile", "CnnProfile", "TimingProfile", "profile_for"]


@dataclass(frozen=True)
class ActivationProfile:
    per_h: float  # bytes per s·b·h element per layer
    per_i: float  # bytes per s·b·i element per layer (MLP intermediate; per active expert for MoE)
    per_kv: float  # bytes per s·b·k·d element per layer
    eager_scores: float  # bytes per a·s²·b element per layer, eager attention only (scores, probs, dropout)
    logits: float  # bytes per s·b·V at the loss, peak (held logits + fp32 log-softmax out + two fp32 grads)
    scale: float = 1.0  # measured / counted, fitted per family


@dataclass(frozen=True)
class CnnProfile:
    bytes_per_elem: float  # per activation element kept (fp32 4, bf16 autocast ≈ mixed, bf16 2)
    scale: float = 1.0


# Counted coefficients (see module docstring). Llama-family RMSNorm keeps an fp32 copy of its input even in bf16.
PROFILES: dict[str, dict[str, ActivationProfile]] = {
    "llama": {
        "fp32": ActivationProfile(per_h=36, per_i=16, per_kv=8, eager_scores=8, logits=16),
        "amp": ActivationProfile(per_h=32, per_i=8, per_kv=4, eager_scores=6, logits=14),
        "bf16": ActivationProfile(per_h=22, per_i=8, per_kv=4, eager_scores=4, logits=14),
    },
    "gpt2": {
        "fp32": ActivationProfile(per_h=38, per_i=20, per_kv=0, eager_scores=9, logits=16),
        "amp": ActivationProfile(per_h=24, per_i=10, per_kv=0, eager_scores=5, logits=14),
        "bf16": ActivationProfile(per_h=20, per_i=10, per_kv=0, eager_scores=5, logits=14),
    },
}

CNN_PROFILES: dict[str, CnnProfile] = {
    "fp32": CnnProfile(bytes_per_elem=4.0),
    "amp": CnnProfile(bytes_per_elem=3.0),  # conv outputs bf16, batch-norm outputs fp32
    "bf16": CnnProfile(bytes_per_elem=2.0),
}

# Families that share the Llama decoder layer use its profile.
FAMILY_ALIAS = {"mistral": "llama", "qwen2": "llama", "qwen3": "llama", "mixtral": "llama", "gemma": "llama",
                "phi3": "llama"}  # fmt: skip


def profile_for(family: str, mode: str) -> ActivationProfile:
    return PROFILES[FAMILY_ALIAS.get(family, family if family in PROFILES else "llama")][mode]


@dataclass(frozen=True)
class TimingProfile:
    """Constants of the step-time model (see compute.py); fitted on an H200 with eager PyTorch + transformers."""

    gemm_efficiency: float = 0.70  # model matmuls reach this fraction of the large-GEMM ceiling
    elementwise_passes: float = 6.0  # activation bytes are read/written this many times over fwd+bwd
    host_s_per_layer_train: float = 250e-6  # Python/launch cost of one layer's forward+backward (eager)
    host_s_per_layer_decode: float = 90e-6  # Python/launch cost of one layer in one decode step
    host_s_per_step: float = 2e-3  # fixed per training step (loss, optimizer launch, zero_grad)
    host_s_per_token: float = 1.0e-3  # fixed per generated token (sampling, cache bookkeeping)


TIMING = TimingProfile()
