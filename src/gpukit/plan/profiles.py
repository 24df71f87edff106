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
    """The time model's few fitted constants (compute.py); everything else it uses is a measured part
    (``plan --calibrate``, plan/calibration.py). Refitted on 2026-12-05 by benchmarks/scripts/plan_error_table.py's
    ``fit`` on the 32 training rows measured on H200s on 2026-12-01 and 2026-12-02
    (benchmarks/plan-error_h200_2026-12-05.md), one part at a time:
    ``elementwise_passes`` against the transformer forward phases' measured device-busy time (the GPU part alone,
    with ``logits_traffic_bytes`` counted from the kernels), then ``backward_traffic_scale`` against the backward
    phases'; ``host_scale`` as the median of measured / predicted host
    time over the phases that are clearly host-bound; ``overlap_penalty``, ``cnn_elementwise_passes`` and
    ``cnn_overlap_penalty`` against the step times. The decode constants are the 2026-12-01 fit's. The test is
    NEW_HELD_OUT_3 (benchmarks/scripts/plan_error_grid.py): measured after the model's parts were fixed, and read by
    no fit."""

    # activation bytes are moved this many times over forward + backward (element-wise, normalisation, casts, copies)
    elementwise_passes: float = 17.0
    # bytes moved per logit element by the loss over forward + backward (fp32 upcast, log-softmax, its gradient, the
    # cast back): counted from the kernels, 23 forward + 27.5 backward at the calibrated bandwidth
    # (benchmarks/plan-kernel-mix_h200_2026-12-04.md, Qwen2-0.5B's 151,936-entry vocabulary)
    logits_traffic_bytes: float = 50.0
    # the backward's element-wise kernels move this share of what the count above gives them (fused gradient kernels
    # read a tensor once for several outputs): fitted against the backward phases' device-busy time alone
    backward_traffic_scale: float = 0.86
    prefill_elementwise_passes: float = 2.0  # generate()'s prefill: a forward without autograd (fitted with decode)
    recompute_traffic_fraction: float = 1 / 3  # recomputation moves the forward's share of the activation traffic
    cnn_elementwise_passes: float = 16.0  # CNN activations (conv, batch-norm, ReLU, pooling) moved this often
    overlap_penalty: float = 0.0  # phase = max(gpu, host) + this × min(gpu, host): where the other one is the bound
    cnn_overlap_penalty: float = 0.5  # the same for a CNN's forward and backward
    decode_overlap_penalty: float = 0.65  # the same for prefill and a decode step of generate()
    host_scale: float = 1.03  # a real model's host floor / the calibrated tiny models' (training phases)
    decode_host_scale: float = 1.1  # the same for prefill and a decode step


TIMING = TimingProfile()
