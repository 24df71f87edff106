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
    gqa_fp32_scores: float = 0.0  # bytes per a·s²·b when SDPA has no fused fp32 kernel for GQA (math fallback)
    scale: float = 1.0  # measured / counted, fitted per family


@dataclass(frozen=True)
class CnnProfile:
    bytes_per_elem: float  # per counted activation element kept for backward
    backward_extra: float  # backward peak above the forward's end, as a fraction of the activations


# Counted coefficients (see module docstring). Llama-family RMSNorm keeps an fp32 copy of its input even in bf16.
PROFILES: dict[str, dict[str, ActivationProfile]] = {
    "llama": {
        # fp32 SDPA with grouped-query attention falls back to the math kernel, which keeps the fp32 probabilities.
        "fp32": ActivationProfile(per_h=36, per_i=16, per_kv=8, eager_scores=4, logits=16, gqa_fp32_scores=4),
        "amp": ActivationProfile(per_h=30, per_i=8, per_kv=4, eager_scores=6, logits=14),
        "bf16": ActivationProfile(per_h=20, per_i=8, per_kv=4, eager_scores=6, logits=14),
    },
    "gpt2": {
        # autocast runs GPT-2's python tanh-GELU's pow in fp32, so amp keeps more per MLP element than bf16.
        "fp32": ActivationProfile(per_h=38, per_i=20, per_kv=0, eager_scores=9, logits=16),
        "amp": ActivationProfile(per_h=24, per_i=16, per_kv=0, eager_scores=7, logits=14),
        "bf16": ActivationProfile(per_h=20, per_i=10, per_kv=0, eager_scores=5, logits=14),
    },
}

# Measured on an H200 (torchvision ResNet-50, the seed CNN): bytes kept per counted activation element, and the
# extra the backward pass holds at its peak as a fraction of the activations (gradient of the largest tensors).
CNN_PROFILES: dict[str, CnnProfile] = {
    "fp32": CnnProfile(bytes_per_elem=3.76, backward_extra=0.015),
    "amp": CnnProfile(bytes_per_elem=1.92, backward_extra=0.01),  # conv/bn outputs kept in bf16 under autocast
    "bf16": CnnProfile(bytes_per_elem=1.92, backward_extra=0.01),
}

# Families that share the Llama decoder layer use its profile.
FAMILY_ALIAS = {
    "mistral": "llama",
    "qwen2": "llama",
    "qwen3": "llama",
    "mixtral": "llama",
    "gemma": "llama",
    "phi3": "llama",
}


def profile_for(family: str, mode: str) -> ActivationProfile:
    return PROFILES[FAMILY_ALIAS.get(family, family if family in PROFILES else "llama")][mode]


@dataclass(frozen=True)
class TimingProfile:
    """Constants of the time model (compute.py), fitted to 18 training steps and 7 generate() calls of GPT-2,
    a Llama-GQA and Qwen2-0.5B (eager PyTorch 2.11 + transformers 5.17) on an H200 host, then checked on 17 held-out
    configurations; the two checkpointing host costs were refitted after grid run 1 on all 10 checkpointing points
    (docs/plan.md, "Checkpointing refit"); docs/plan.md says how to refit them. On that stack the host's per-layer
    work does not overlap the GPU's, so the two add up."""

    gemm_efficiency: float = 1.0  # model matmuls vs the large-GEMM ceiling (measured or datasheet × practical)
    elementwise_passes: float = 9.2  # activation + logits bytes are moved this many times over forward+backward
    host_s_per_layer_train: float = 1.36e-3  # Python + launches of one decoder layer's forward+backward
    host_s_per_layer_amp: float = 0.65e-3  # extra per layer under autocast (the casts)
    # Checkpointing: the recomputed forward's GPU work is in the FLOPs (× 4/3) and the activation traffic; the host
    # pays the checkpoint machinery per layer, and under autocast the recomputed forward's casts again.
    recompute_traffic_fraction: float = 1 / 3  # recomputation moves the forward's share of the activation traffic
    host_s_per_layer_recompute: float = 0.36e-3  # extra per layer with checkpointing (torch.utils.checkpoint)
    host_s_per_layer_recompute_amp: float = 1.56e-3  # extra per recomputed layer under autocast
    host_s_per_layer_cnn: float = 0.20e-3  # per conv/linear layer of a CNN, forward+backward
    cnn_elementwise_passes: float = 20.0  # CNN activations (conv, batch-norm, ReLU, pooling) moved this often
    host_s_per_step_cnn_amp: float = 1.0e-3  # autocast's per-step cost on a CNN (enter/exit, weight casts)
    # transformers generate(), steady state (second call on the same shapes), per layer per decode step:
    host_s_per_layer_decode: float = 0.72e-3  # Llama family (RoPE, GQA, gated MLP)
    host_s_per_layer_decode_gpt2: float = 0.42e-3  # GPT-2 (fused qkv, learned positions)
    host_s_per_token: float = 0.5e-3  # fixed per decode step (logits processors, cache bookkeeping)
    host_s_per_generate: float = 6e-3  # fixed per generate() call (set-up, mask and cache creation)


TIMING = TimingProfile()
