"""Time from FLOPs and bytes: a training step, a whole run, or decoding throughput.

GPU time = matmul FLOPs / (GEMM ceiling × model efficiency) + elementwise traffic / bandwidth; the host's Python and
kernel-launch time per layer is added to it (measured: eager PyTorch + transformers on an H200 host does not hide
it), and the optimizer's traffic on top. Decoding reports two figures: the bandwidth bound (weights + KV cache
read once per token — what an optimised server approaches) and the eager transformers ``generate()`` estimate.
The GEMM ceiling is this machine's measured one (``gpukit bench``) when present, else the datasheet peak × the
practical fraction REFERENCE.md gives (80% H100/H200, 87% A100, 51% MI300X). The MFU printed is achieved model
FLOPs / datasheet peak, so it can be compared across machines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from gpukit.hardware.specs import GpuSpec
from gpukit.plan.memory import MemoryBreakdown, PlanSettings, estimate_memory
from gpukit.plan.models import CnnSpec, ModelSpec, TransformerSpec
from gpukit.plan.profiles import TIMING, TimingProfile

__all__ = ["Ceilings", "TimeEstimate", "ceilings_for", "estimate_time", "step_flops"]

# Large-GEMM rate achievable in practice as a fraction of the dense datasheet peak (REFERENCE.md).
PRACTICAL_GEMM_FRACTION = {
    "h100-sxm": 0.80,
    "h100-pcie": 0.80,
    "h200-sxm": 0.80,
    "a100-40gb": 0.87,
    "a100-80gb": 0.87,
    "mi300x": 0.51,
}
DEFAULT_GEMM_FRACTION = 0.80  # other parts: assumed like H100 (labelled "assumed" in the output)
PRACTICAL_BW_FRACTION = 0.87  # device copy reaches 4,175 of 4,800 GB/s on an H200 (MEASURING.md)


@dataclass(frozen=True)
class Ceilings:
    gemm_tflops: float  # for the recipe's matmul dtype
    peak_tflops: float  # datasheet, for MFU
    bandwidth_gbps: float
    source: str  # "measured on this machine" | "datasheet × practical fraction" | "… (fraction assumed)"
    matmul_dtype: str


def _matmul_dtype(spec: GpuSpec, s: PlanSettings, cnn: bool = False) -> str:
    if cnn and s.recipe == "fp32" and spec.peak_tflops("tf32"):
        return "tf32"  # cuDNN runs fp32 convolutions on TF32 tensor cores by default
    want = "bf16"
    if (s.task == "infer" and s.dtype == "fp16") or (s.task == "train" and s.recipe == "fp32"):
        want = s.dtype if s.task == "infer" else "fp32"
    if spec.peak_tflops(want) is None and want == "bf16":
        want = "fp16" if spec.peak_tflops("fp16") else "fp32"  # V100/T4: no bf16 tensor cores
    return want


def ceilings_for(
    spec: GpuSpec, s: PlanSettings, measured: dict[str, float] | None = None, cnn: bool = False
) -> Ceilings:
    """Ceilings for one GPU; ``measured`` ({"bf16_tflops": …, "bandwidth_gbps": …}) wins when it has the dtype."""
    dtype = _matmul_dtype(spec, s, cnn)
    peak = spec.peak_tflops(dtype) or 0.0
    frac = PRACTICAL_GEMM_FRACTION.get(spec.key, DEFAULT_GEMM_FRACTION)
    gemm = peak * frac
    bw = spec.bandwidth_gbps * PRACTICAL_BW_FRACTION
    src = "datasheet × practical fraction" + ("" if spec.key in PRACTICAL_GEMM_FRACTION else " (fraction assumed)")
    if measured and measured.get(f"{dtype}_tflops"):
        gemm, src = float(measured[f"{dtype}_tflops"]), "measured on this machine (gpukit bench)"
    if measured and measured.get("bandwidth_gbps"):
        bw = float(measured["bandwidth_gbps"])
    return Ceilings(gemm, peak, bw, src, dtype)


def step_flops(model: ModelSpec, s: PlanSettings) -> float:
    """Model FLOPs of one training step on all GPUs (6·P·tokens + 12·L·h·s per token; + a forward if recomputing)."""
    if isinstance(model, CnnSpec):
        fwd = model.flops_per_sample * s.batch * s.dp
        return fwd * (4 if s.checkpointing else 3)
    tokens = s.batch * s.seq * s.dp
    matmul_params = model.active_params - model.learned_positions * model.hidden_size
    if not model.tied_embeddings:
        matmul_params -= model.vocab_size * model.hidden_size  # the input embedding is a lookup
    per_token_fwd = 2 * matmul_params + 4 * model.num_layers * model.hidden_size * s.seq
    return tokens * per_token_fwd * (4 if s.checkpointing else 3)


@dataclass(frozen=True)
class TimeEstimate:
    task: str
    mfu: float | None  # model FLOPs / (time × datasheet peak)
    ceilings_source: str
    matmul_dtype: str
    step_s: float | None = None  # training: one optimizer step
    tokens_per_s: float | None = None  # training: tokens (or samples) per second over all GPUs; infer: generated
    total_s: float | None = None  # training: the whole --tokens/--samples run; infer: one generate() call
    steps: int | None = None
    prefill_s: float | None = None
    per_token_s: float | None = None
    gpu_s: float | None = None
    host_s: float | None = None
    bandwidth_bound_tokens_per_s: float | None = None  # decode: weights + KV read once per step, no host cost

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _activation_traffic_bytes(model: TransformerSpec, s: PlanSettings, mem: MemoryBreakdown, t: TimingProfile) -> float:
    """Activation + logits bytes the step's elementwise kernels move (before × ``elementwise_passes``).

    Checkpointing shrinks what is *kept*, not what is *computed*: every layer still writes its full activations in
    the forward, writes them again in the recomputed forward, and reads them in the backward. So the traffic is
    counted from the activations as without checkpointing, plus ``recompute_traffic_fraction`` of them for the
    recomputation (the forward's share, as the FLOPs' 4/3)."""
    if not s.checkpointing:
        return float(mem.activations_bytes + mem.logits_bytes)
    full = estimate_memory(model, replace(s, checkpointing=False))
    return full.activations_bytes * (1 + t.recompute_traffic_fraction) + full.logits_bytes


def _train_time(
    model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, c: Ceilings, t: TimingProfile, work: float | None
) -> TimeEstimate:
    if isinstance(model, CnnSpec) and model.family != "cnn":  # --params: no FLOPs model, so no time (not 0 FLOPs)
        return TimeEstimate(task="train", mfu=None, ceilings_source=c.source, matmul_dtype=c.matmul_dtype)
    flops = step_flops(model, s) / s.gpus
    compute = flops / (c.gemm_tflops * 1e12 * t.gemm_efficiency)
    bw = c.bandwidth_gbps * 1e9
    opt_state = mem.optimizer_bytes + mem.master_bytes
    optimizer = (3 * mem.weights_bytes + 2 * mem.gradients_bytes + 2.5 * opt_state) / bw  # foreach AdamW traffic
    if isinstance(model, TransformerSpec):
        traffic = _activation_traffic_bytes(model, s, mem, t) * t.elementwise_passes / bw
        amp = s.recipe == "amp-bf16"
        per_layer = t.host_s_per_layer_train + (t.host_s_per_layer_amp if amp else 0.0)
        if s.checkpointing:
            per_layer += t.host_s_per_layer_recompute + (t.host_s_per_layer_recompute_amp if amp else 0.0)
        host = model.num_layers * per_layer
    else:
        traffic = mem.activations_bytes * t.cnn_elementwise_passes / bw
        host = model.weight_layers * t.host_s_per_layer_cnn
        host += t.host_s_per_step_cnn_amp if s.recipe == "amp-bf16" else 0.0
    gpu = compute + traffic + optimizer
    step = gpu + host
    per_step = s.batch * s.dp * (s.seq if isinstance(model, TransformerSpec) else 1)
    steps = None if work is None else max(1, round(work / per_step))
    return TimeEstimate(
        task="train",
        mfu=(step_flops(model, s) / s.gpus) / (step * c.peak_tflops * 1e12) if c.peak_tflops else None,
        ceilings_source=c.source,
        matmul_dtype=c.matmul_dtype,
        step_s=step,
        tokens_per_s=per_step / step,
        total_s=None if steps is None else steps * step,
        steps=steps,
        gpu_s=gpu,
        host_s=host,
    )


def _decode_time(
    model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, c: Ceilings, t: TimingProfile
) -> TimeEstimate:
    if not isinstance(model, TransformerSpec):
        per = mem.weights_bytes / (c.bandwidth_gbps * 1e9)
        return TimeEstimate("infer", None, c.source, c.matmul_dtype, per_token_s=per, gpu_s=per)
    layers = model.num_layers
    per_layer = t.host_s_per_layer_decode_gpt2 if model.family == "gpt2" else t.host_s_per_layer_decode
    prefill_flops = 2 * model.active_params * s.batch * s.prompt / s.tp
    prefill = prefill_flops / (c.gemm_tflops * 1e12 * t.gemm_efficiency)
    prefill = max(prefill, layers * per_layer + t.host_s_per_token) + t.host_s_per_generate
    kv_avg = mem.kv_cache_bytes * (s.prompt + s.new_tokens / 2) / max(1, s.prompt + s.new_tokens)
    gpu = (mem.weights_bytes + kv_avg) / (c.bandwidth_gbps * 1e9)
    host = layers * per_layer + t.host_s_per_token
    per_token = gpu + host
    total = prefill + max(0, s.new_tokens - 1) * per_token
    flops = 2 * model.active_params * s.batch * (s.prompt + s.new_tokens) / s.tp
    return TimeEstimate(
        task="infer",
        mfu=flops / (total * c.peak_tflops * 1e12) if c.peak_tflops else None,
        ceilings_source=c.source,
        matmul_dtype=c.matmul_dtype,
        tokens_per_s=s.batch * s.new_tokens / total,
        total_s=total,
        prefill_s=prefill,
        per_token_s=per_token,
        gpu_s=gpu,
        host_s=host,
        bandwidth_bound_tokens_per_s=s.batch / gpu,
    )


def estimate_time(
    model: ModelSpec,
    s: PlanSettings,
    mem: MemoryBreakdown,
    spec: GpuSpec,
    measured: dict[str, float] | None = None,
    work: float | None = None,
    timing: TimingProfile = TIMING,
) -> TimeEstimate:
    """Time on ``spec`` GPUs; ``work`` is the number of tokens (transformers) or samples (CNNs) to train on."""
    c = ceilings_for(spec, s, measured, cnn=isinstance(model, CnnSpec))
    if s.task == "train":
        return _train_time(model, s, mem, c, timing, work)
    return _decode_time(model, s, mem, c, timing)
