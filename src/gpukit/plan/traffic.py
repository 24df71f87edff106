"""Element-wise traffic and kernel counts of one decoder layer, counted from the Hugging Face code path.

Everything in a training step that is not a matmul or the attention kernel — RMSNorm's fp32 upcast (Llama:
``to(fp32)``, ``pow``, ``mean``, ``rsqrt``, two multiplies, ``to(bf16)``, twice a layer), rotary's ``cat`` and
multiplies on q and k, SiLU × gate, GPT-2's Python tanh-GELU, dropout, the residual adds, the loss's fp32 logits —
is counted per aten op as the bytes it reads plus the bytes it writes, per token:
``h·per_h + i·per_i + kd·per_kv`` for one layer (``kd`` = KV heads × head dim) and ``V·per_v`` for the output head
and the loss. ``benchmarks/scripts/count_layer_traffic.py`` recounts the table (tiny models under a
TorchDispatchMode; differences over layers, tokens and widths); a test pins hand-checked entries.

Kernels per layer (forward; backward without recomputation) are the same ops counted one launch each; with the
matmuls and the attention kernel they are a layer's launches, and the host floor's per-layer cost is these × a host
cost per launch that ``plan --calibrate``'s tiny models measure (compute.py pools it over their families).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpukit.plan.models import TransformerSpec

__all__ = ["TRAFFIC", "LayerTraffic", "head_bytes", "layer_bytes", "layer_launches", "traffic_for"]


@dataclass(frozen=True)
class LayerTraffic:
    fwd: tuple[float, float, float]  # bytes per token of one layer's forward: (per_h, per_i, per_kv)
    bwd: tuple[float, float, float]  # the same for its backward (autograd's, without any recomputation)
    head_fwd: float  # bytes per token per vocabulary entry: logits upcast, log-softmax, the loss
    head_bwd: float
    kernels_fwd: int  # element-wise kernels one layer launches in the forward
    kernels_bwd: int


# count_layer_traffic.py on transformers 5.24 / torch 2.14 (mode: fp32 | amp = fp32 weights + bf16 autocast | bf16).
# Llama bf16 forward per h: 2 RMSNorms × 36 (to fp32 2+4, pow 4+4, mean 4, × rsqrt 4+4, to bf16 4+2, × weight 2+2),
# 2 residual adds × 6, rotary on q 20 (× cos 4, neg 2, cat 4, × sin 4, add 6); per_kv: rotary on k;
# per_i: SiLU 4 + × up 6.
TRAFFIC: dict[str, dict[str, LayerTraffic]] = {
    "gpt2": {
        "fp32": LayerTraffic((96.25, 72.0, 0.0), (116.25, 116.0, 0.0), 12.0, 20.0, 18, 22),
        "amp": LayerTraffic((76.25, 76.0, 0.0), (106.25, 110.0, 0.0), 18.0, 26.0, 30, 38),
        "bf16": LayerTraffic((48.12, 36.0, 0.0), (58.12, 58.0, 0.0), 18.0, 26.0, 18, 22),
    },
    "llama": {
        "fp32": LayerTraffic((120.75, 20.0, 40.0), (305.12, 36.0, 52.0), 12.0, 20.0, 26, 48),
        "amp": LayerTraffic((142.75, 10.0, 36.0), (347.12, 18.0, 52.0), 18.0, 26.0, 40, 68),
        "bf16": LayerTraffic((104.75, 10.0, 20.0), (249.12, 18.0, 26.0), 18.0, 26.0, 30, 52),
    },
    "qwen2": {  # Llama's layer with q/k/v biases (their gradients: three more sums)
        "fp32": LayerTraffic((120.75, 20.0, 40.0), (309.12, 36.0, 60.0), 12.0, 20.0, 26, 51),
        "amp": LayerTraffic((142.75, 10.0, 36.0), (349.12, 18.0, 56.0), 18.0, 26.0, 43, 74),
        "bf16": LayerTraffic((104.75, 10.0, 20.0), (251.12, 18.0, 30.0), 18.0, 26.0, 30, 55),
    },
}


def traffic_for(model: TransformerSpec, mode: str) -> LayerTraffic:
    """The counted row for ``model``'s family (Llama's decoder layer for the families that share it)."""
    family = model.family if model.family in TRAFFIC else "llama"
    return TRAFFIC[family][mode]


def layer_bytes(model: TransformerSpec, mode: str, tokens: int, phase: str, tp: int = 1) -> float:
    """Element-wise bytes of one layer's ``phase`` (forward | backward) over ``tokens`` tokens on one GPU."""
    t = traffic_for(model, mode)
    per_h, per_i, per_kv = t.fwd if phase == "forward" else t.bwd
    kd = model.num_kv_heads * model.head_dim
    mlp = per_i * model.intermediate_size * model.experts_per_token
    per_token = per_h * model.hidden_size + (mlp + per_kv * kd) / tp
    return tokens * per_token


def head_bytes(model: TransformerSpec, mode: str, tokens: int, phase: str, tp: int = 1) -> float:
    """Element-wise bytes of the output head and the loss (the logits, in fp32) over ``tokens`` tokens."""
    t = traffic_for(model, mode)
    return tokens * model.vocab_size / tp * (t.head_fwd if phase == "forward" else t.head_bwd)


def layer_launches(family: str, mode: str, phase: str, checkpoint: str = "none", gated_mlp: bool = True) -> int:
    """Kernels one layer launches in ``phase``: the counted element-wise ones, its matmuls (backward: two per
    forward one) and the attention kernel; a checkpointed backward launches the recomputed forward's too."""
    t = TRAFFIC.get(family, TRAFFIC["llama"])[mode]
    matmuls = 4 if family == "gpt2" else (7 if gated_mlp else 6)
    fwd = t.kernels_fwd + matmuls + 1
    if phase == "forward":
        return fwd
    return t.kernels_bwd + 2 * matmuls + 1 + (fwd if checkpoint != "none" else 0)
