"""Time from measured parts: a training step by phase (forward, backward, optimizer), or a generate() call.

Each phase has a GPU time and a host time, built from counts × rates of a calibration (plan/calibration.py):

* GPU: every matmul's FLOPs at the GEMM rate measured for its size and dtype (a transformer layer's q/k/v/o and
  MLP projections, the output head; backward = two GEMMs per forward one; checkpointing recomputes the layers'
  forward inside the backward), attention's FLOPs at the SDPA kernel's measured forward / backward rate (or as
  two batched GEMMs with eager attention), activation traffic (the bytes the elementwise and normalisation kernels
  move, ``elementwise_passes`` × the activations autograd keeps) at the measured copy bandwidth, and the
  optimizer's seconds per parameter measured for its implementation (foreach / fused / for-loop) and state dtype;
* host: the host floor — Python + one launch per kernel — measured per layer on tiny models of the same family,
  precision and checkpointing variant (where the GPU waits on the host), plus the optimizer's per-tensor cost.

Eager PyTorch queues kernels asynchronously, so a phase takes ``max(gpu, host) + overlap_penalty × min(gpu, host)``
(the penalty: the parts of a phase where the other one is the bound). Each phase names its bound — GEMM, attention,
memory bandwidth or host — so a miss against ``--measure`` names its part. Decode: weights + the KV cache read
once per token at the measured decode bandwidth against the host floor per token; prefill is a forward.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gpukit.hardware.specs import GpuSpec
from gpukit.plan.calibration import (
    DEFAULT_GEMM_FRACTION,
    PRACTICAL_BW_FRACTION,
    PRACTICAL_GEMM_FRACTION,
    Calibration,
    conv_body_rate,
    datasheet_calibration,
    interp_rate,
    time_accuracy,
)
from gpukit.plan.memory import (
    MemoryBreakdown,
    PlanSettings,
    activation_bytes,
    estimate_memory,
    pool_index_extra_bytes,
)
from gpukit.plan.models import CnnSpec, ModelSpec, TransformerSpec
from gpukit.plan.profiles import TIMING, TimingProfile

__all__ = [
    "Ceilings",
    "PhaseTime",
    "TimeEstimate",
    "ceilings_for",
    "datasheet_calibration",
    "estimate_time",
    "layer_gemms",
    "param_tensors",
    "step_flops",
]


@dataclass(frozen=True)
class Ceilings:
    gemm_tflops: float  # for the recipe's matmul dtype
    peak_tflops: float  # datasheet, for MFU
    bandwidth_gbps: float
    source: str
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
    """Large-GEMM and bandwidth ceilings for one GPU (datasheet × practical fraction, or ``gpukit bench``'s)."""
    dtype = _matmul_dtype(spec, s, cnn)
    peak = spec.peak_tflops(dtype) or 0.0
    gemm = peak * PRACTICAL_GEMM_FRACTION.get(spec.key, DEFAULT_GEMM_FRACTION)
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
class PhaseTime:
    name: str  # forward | backward | optimizer | prefill | decode_token
    gemm_s: float
    attention_s: float
    memory_s: float  # elementwise / normalisation / optimizer bytes at bandwidth
    host_s: float
    gpu_s: float
    total_s: float
    bound: str  # gemm | attention | memory | host

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _phase(name: str, gemm: float, attn: float, memory: float, host: float, t: TimingProfile, cnn: bool = False
           ) -> PhaseTime:  # fmt: skip
    gpu = gemm + attn + memory
    decode = name in ("prefill", "decode_token")
    # the host floor is measured on tiny models; a real model's Python runs slower per op (larger caches and
    # allocator work): a fitted scale per kind. generate() synchronises once per token (its stop check), so its
    # steps overlap less than a training phase.
    host *= t.decode_host_scale if decode else t.host_scale
    # a CNN's layers differ widely (early ones move large activations, late ones little), so some wait on the host
    # while others keep the GPU busy: its phases overlap less than a transformer's identical layers
    penalty = t.decode_overlap_penalty if decode else t.cnn_overlap_penalty if cnn else t.overlap_penalty
    total = max(gpu, host) + penalty * min(gpu, host)
    parts = {"gemm": gemm, "attention": attn, "memory": memory}
    bound = "host" if host >= gpu else max(parts, key=lambda k: parts[k])
    return PhaseTime(name, gemm, attn, memory, host, gpu, total, bound)


@dataclass(frozen=True)
class TimeEstimate:
    task: str
    mfu: float | None  # model FLOPs / (time × datasheet peak)
    ceilings_source: str  # the calibration the rates came from (file, or the datasheet fallback)
    matmul_dtype: str
    step_s: float | None = None  # training: one optimizer step
    tokens_per_s: float | None = None  # training: tokens (or samples) per second over all GPUs; infer: generated
    total_s: float | None = None  # training: the whole --tokens/--samples run; infer: one warm generate() call
    steps: int | None = None
    prefill_s: float | None = None
    per_token_s: float | None = None
    gpu_s: float | None = None
    host_s: float | None = None
    bandwidth_bound_tokens_per_s: float | None = None  # decode: weights + KV read once per step, no host cost
    phases: list[dict[str, Any]] = field(default_factory=list)  # PhaseTime.to_dict() per phase
    calibrated: bool = False  # True: rates measured on this GPU model (plan --calibrate); False: datasheet
    accuracy: dict[str, Any] = field(default_factory=dict)  # how far such predictions were off (time_accuracy)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- counts: GEMMs, attention, traffic ---


def layer_gemms(m: TransformerSpec, tokens: int, tp: int = 1) -> list[float]:
    """FLOPs of each forward matmul of one decoder layer over ``tokens`` rows (tensor-parallel: N split by tp)."""
    h, i = m.hidden_size, m.intermediate_size
    q, kv = m.num_heads * m.head_dim // tp, m.num_kv_heads * m.head_dim // max(1, tp)
    if m.family == "gpt2":
        shapes = [(3 * h // tp, h), (h, h // tp), (i // tp, h), (h, i // tp)]
    else:
        mlp = [(i // tp, h), (i // tp, h), (h, i // tp)] if m.gated_mlp else [(i // tp, h), (h, i // tp)]
        shapes = [(q, h), (kv, h), (kv, h), (h, q), *(mlp * m.experts_per_token)]
    return [2.0 * tokens * n * k for n, k in shapes]


# A 16-bit GEMM with a dimension that is not a multiple of 8 elements (GPT-2's 50,257-entry vocabulary) cannot use
# the aligned tensor-core kernels: cuBLAS runs an align-1 CUTLASS kernel instead, which on an H200 reached 95 TFLOPS
# in the forward and 143 in the backward's two GEMMs, 0.14 and 0.20 of the aligned rate at that size
# (benchmarks/plan-kernel-mix_h200_2026-12-04.md). Padding the vocabulary to a multiple of 64 avoids it.
UNALIGNED_GEMM_FRACTION = {"forward": 0.14, "backward": 0.20}
LOGITS_FORWARD_SHARE = 23 / 50.5  # of logits_traffic_bytes (the rest is the backward's)


def _head_s(m: TransformerSpec, rows: float, table: list[tuple[float, float]], dtype: str, tp: int, phase: str
            ) -> float:  # fmt: skip
    """The output head's GEMM(s) of one phase over ``rows`` positions (the backward has two of the forward's size)."""
    t = _gemm_s([2.0 * rows * m.hidden_size * m.vocab_size / tp], table) * (2 if phase == "backward" else 1)
    if dtype != "fp32" and (m.vocab_size // tp) % 8:
        t /= UNALIGNED_GEMM_FRACTION[phase]
    return t


def _gemm_s(flops: list[float], table: list[tuple[float, float]]) -> float:
    return sum(f / (interp_rate(table, f) * 1e12) for f in flops)


def _attention_fwd_flops(m: TransformerSpec, batch: int, seq: int, tp: int) -> float:
    """Causal attention forward as FLOPs counted by the calibration: 2·b·a·s²·d (QKᵀ and PV, half the square)."""
    return 2.0 * batch * (m.num_heads // tp) * seq * seq * m.head_dim


def _rates(cal: Calibration, table: dict[str, list[tuple[float, float]]], dtype: str) -> list[tuple[float, float]]:
    for d in (dtype, "bf16", "fp16", "fp32"):
        if table.get(d):
            return table[d]
    return cal.gemm[next(iter(cal.gemm))]


def _host_line(cal: Calibration, key: str, phase: str, layers: int, fallback: float) -> float:
    line = cal.host.get(key, {}).get(phase)
    return fallback if line is None else line[0] + line[1] * layers


def _optimizer_phase(model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, cal: Calibration, t: TimingProfile
                     ) -> PhaseTime:  # fmt: skip
    state = "bf16" if s.recipe == "bf16" else "fp32"
    row = cal.optimizer.get(s.optimizer_impl, {}).get(state) or cal.optimizer.get("foreach", {}).get(state)
    local = model.params / s.tp / (s.dp if s.shard != "ddp" else 1)
    scale = {"sgd": 0.45, "adafactor": 0.6, "adam8bit": 0.5}.get(s.optimizer, 1.0)  # bytes against AdamW's
    if row:
        gpu = local * row["s_per_param"] * scale
        host = row["fixed_s"] + param_tensors(model) * row["s_per_tensor"]
    else:  # no measured optimizer: AdamW's counted traffic (weights, gradient, two moments) at bandwidth
        opt_state = mem.optimizer_bytes + mem.master_bytes
        gpu = (3 * mem.weights_bytes + 2 * mem.gradients_bytes + 2.5 * opt_state) / (cal.bandwidth_gbps * 1e9)
        host = 0.0
    return _phase("optimizer", 0.0, 0.0, gpu, host, t)


def param_tensors(model: ModelSpec) -> int:
    """How many parameter tensors the optimizer walks (its per-tensor host cost)."""
    if isinstance(model, CnnSpec):
        return model.param_tensors or 2 * max(1, model.weight_layers)
    per_layer = (4 + 3 * model.num_experts if model.gated_mlp else 4 + 2) + (2 if not model.layernorm else 4)
    per_layer += (3 if model.qkv_bias else 0) + (1 if model.out_bias else 0)
    if model.family == "gpt2":
        per_layer = 12  # ln_1 w/b, c_attn w/b, c_proj w/b, ln_2 w/b, c_fc w/b, mlp.c_proj w/b
    heads = 1 if model.tied_embeddings else 2
    return model.num_layers * per_layer + heads + (2 if model.layernorm else 1) + (1 if model.learned_positions else 0)


def _group(model: TransformerSpec, table: dict[str, Any], suffix: str = "") -> str:
    """The calibrated tiny model standing for ``model``'s family (its own if measured, else the Llama one)."""
    own = {"gpt2": "gpt2", "qwen2": "qwen2"}.get(model.family, "llama")
    return own if f"{own}{suffix}" in table else "llama"


def _transformer_train(m: TransformerSpec, s: PlanSettings, mem: MemoryBreakdown, cal: Calibration, t: TimingProfile
                       ) -> list[PhaseTime]:  # fmt: skip
    dtype = "fp32" if s.recipe == "fp32" else "bf16"
    gemm = _rates(cal, cal.gemm, dtype)
    tokens = s.batch * s.seq
    layer = _gemm_s(layer_gemms(m, tokens, s.tp), gemm)
    fwd_gemm = m.num_layers * layer + _head_s(m, tokens, gemm, dtype, s.tp, "forward")
    bwd_gemm = 2 * m.num_layers * layer + _head_s(m, tokens, gemm, dtype, s.tp, "backward")
    # Eager attention, and fp32 SDPA with grouped-query attention (no fused fp32 GQA kernel: the math fallback),
    # compute the full square as two batched GEMMs; otherwise the causal flash kernel at its measured rates.
    if s.attn == "eager" or (s.recipe == "fp32" and m.num_kv_heads < m.num_heads):
        att = 2 * _attention_fwd_flops(m, s.batch, s.seq, s.tp)
        attn_f, attn_b = m.num_layers * _gemm_s([att / 2] * 2, gemm), 2 * m.num_layers * _gemm_s([att / 2] * 2, gemm)
    else:
        f = _attention_fwd_flops(m, s.batch, s.seq, s.tp)
        attn_f = m.num_layers * f / (interp_rate(_rates(cal, cal.attention_fwd, dtype), f) * 1e12)
        b = 2.5 * f
        attn_b = m.num_layers * b / (interp_rate(_rates(cal, cal.attention_bwd, dtype), b) * 1e12)
    bw = cal.bandwidth_gbps * 1e9
    plain, recompute = _activation_traffic_bytes(m, s, mem, t)
    logits = tokens * m.vocab_size / s.tp * t.logits_traffic_bytes  # the loss's bytes over both phases
    fwd_mem = (plain * t.elementwise_passes / 3 + logits * LOGITS_FORWARD_SHARE) / bw
    bwd_mem = (plain * t.elementwise_passes * 2 / 3 + logits * (1 - LOGITS_FORWARD_SHARE)) / bw
    if s.checkpointing:  # the backward recomputes every layer's forward first
        bwd_gemm += m.num_layers * layer
        attn_b += attn_f
        bwd_mem += recompute * t.elementwise_passes / bw
    bwd_mem *= t.backward_traffic_scale
    suffix = f"|{s.mode}|{s.checkpoint_variant if s.checkpointing else 'none'}"
    key = _group(m, cal.host, suffix) + suffix
    host_f = _host_line(cal, key, "forward", m.num_layers, 0.0)
    host_b = _host_line(cal, key, "backward", m.num_layers, 0.0)
    return [
        _phase("forward", fwd_gemm, attn_f, fwd_mem, host_f, t),
        _phase("backward", bwd_gemm, attn_b, bwd_mem, host_b, t),
        _optimizer_phase(m, s, mem, cal, t),
    ]


def _cnn_key(model: CnnSpec) -> str:
    return {"torchvision:resnet50": "resnet50", "gpukit:seed_cnn": "seed-cnn"}.get(model.builder, model.name)


def _cnn_train(m: CnnSpec, s: PlanSettings, mem: MemoryBreakdown, cal: Calibration, t: TimingProfile
               ) -> list[PhaseTime]:  # fmt: skip
    dtype = "tf32" if s.recipe == "fp32" else "bf16"
    rates = _rates(cal, cal.conv or cal.gemm, dtype)
    fwd_flops = m.flops_per_sample * s.batch
    per_layer = fwd_flops / max(1, m.weight_layers)
    # a deep CNN at its body convolutions' rate; a shallow one (the seed CNN: one 3-channel convolution) by size
    body = conv_body_rate(rates) if m.weight_layers >= 10 else None
    fwd = fwd_flops / ((body or interp_rate(rates, per_layer)) * 1e12)
    # the element-wise kernels' bytes; the max-pool indices' exact size (memory.py) is written once, not passed over
    acts = mem.activations_bytes - pool_index_extra_bytes(m, s)
    traffic = acts * t.cnn_elementwise_passes / (cal.bandwidth_gbps * 1e9)
    host = cal.host_cnn.get(f"{_cnn_key(m)}|{s.mode}", {})
    resnet = cal.host_cnn.get(f"resnet50|{s.mode}", {})  # another CNN: ResNet-50's host cost per weight layer

    def host_of(phase: str) -> float:
        if phase in host:
            return host[phase]
        return resnet.get(phase, 0.0) * m.weight_layers / 54

    return [
        _phase("forward", fwd, 0.0, traffic / 3, host_of("forward"), t, cnn=True),
        _phase("backward", 2 * fwd, 0.0, traffic * 2 / 3, host_of("backward"), t, cnn=True),
        _optimizer_phase(m, s, mem, cal, t),
    ]


def _activation_traffic_bytes(model: TransformerSpec, s: PlanSettings, mem: MemoryBreakdown, t: TimingProfile
                              ) -> tuple[float, float]:  # fmt: skip
    """(activation bytes of a plain step, bytes the recomputation adds) before × ``elementwise_passes``.

    Checkpointing shrinks what is *kept*, not what is *computed*: every layer still writes its full activations in
    the forward, writes them again in the recomputed forward, and reads them in the backward. So the traffic is
    counted from the activations as without checkpointing, plus ``recompute_traffic_fraction`` of them for the
    recomputation (the forward's share, as the FLOPs' 4/3)."""
    if not s.checkpointing:
        return float(mem.activations_bytes), 0.0
    full = estimate_memory(model, replace(s, checkpointing=False))
    return float(full.activations_bytes), full.activations_bytes * t.recompute_traffic_fraction


def _probed(phases: list[PhaseTime], host: dict[str, float] | None, t: TimingProfile, cnn: bool = False
            ) -> list[PhaseTime]:  # fmt: skip
    """The phases with the host floor that ``plan --probe-host`` timed on this machine (plan/probe.py) in place of
    the calibration's, where it timed that phase."""
    if not host:
        return phases
    return [p if p.name not in host else
            _phase(p.name, p.gemm_s, p.attention_s, p.memory_s, host[p.name], t, cnn and p.name != "optimizer")
            for p in phases]  # fmt: skip


def _train_time(model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, cal: Calibration, spec: GpuSpec,
                t: TimingProfile, work: float | None, host: dict[str, float] | None = None
                ) -> TimeEstimate:  # fmt: skip
    c = ceilings_for(spec, s, None, cnn=isinstance(model, CnnSpec))
    if isinstance(model, CnnSpec) and model.family != "cnn":  # --params: no FLOPs model, so no time (not 0 FLOPs)
        return TimeEstimate(task="train", mfu=None, ceilings_source=cal.source, matmul_dtype=c.matmul_dtype)
    if isinstance(model, TransformerSpec):
        phases = _probed(_transformer_train(model, s, mem, cal, t), host, t)
    else:
        phases = _probed(_cnn_train(model, s, mem, cal, t), host, t, cnn=True)
    step = sum(p.total_s for p in phases)
    per_step = s.batch * s.dp * (s.seq if isinstance(model, TransformerSpec) else 1)
    steps = None if work is None else max(1, round(work / per_step))
    return TimeEstimate(
        task="train",
        mfu=(step_flops(model, s) / s.gpus) / (step * c.peak_tflops * 1e12) if c.peak_tflops else None,
        ceilings_source=cal.source,
        matmul_dtype=c.matmul_dtype,
        step_s=step,
        tokens_per_s=per_step / step,
        total_s=None if steps is None else steps * step,
        steps=steps,
        gpu_s=sum(p.gpu_s for p in phases),
        host_s=sum(p.host_s for p in phases),
        phases=[p.to_dict() for p in phases],
        calibrated=cal.measured,
    )


def _decode_phases(m: TransformerSpec, s: PlanSettings, mem: MemoryBreakdown, cal: Calibration, t: TimingProfile
                   ) -> tuple[PhaseTime, PhaseTime]:  # fmt: skip
    dtype = "fp16" if s.dtype == "fp16" else "bf16"
    gemm = _rates(cal, cal.gemm, dtype)
    tokens = s.batch * s.prompt
    layer = _gemm_s(layer_gemms(m, tokens, s.tp), gemm)
    head = _head_s(m, s.batch, gemm, dtype, s.tp, "forward")  # generate keeps the last position
    f = _attention_fwd_flops(m, s.batch, s.prompt, s.tp)
    attn = m.num_layers * f / (interp_rate(_rates(cal, cal.attention_fwd, dtype), f) * 1e12)
    acts, _, _ = activation_bytes(m, replace(s, task="train", recipe="bf16", seq=s.prompt, checkpointing=False))
    memory = acts * t.prefill_elementwise_passes / 3 / (cal.bandwidth_gbps * 1e9)
    line = cal.host_decode.get(_group(m, cal.host_decode), {})
    host_p = line["prefill"][0] + line["prefill"][1] * m.num_layers if "prefill" in line else 0.0
    host_t = line["token"][0] + line["token"][1] * m.num_layers if "token" in line else 0.0
    prefill = _phase("prefill", m.num_layers * layer + head, attn, memory, host_p, t)
    # transformers' DynamicCache appends by torch.cat: each step reads and rewrites the whole cache, then attention
    # reads it — three passes over the KV cache at its mean length, beside one over the weights
    read = (mem.weights_bytes + 3 * _kv_avg(mem, s)) / (cal.decode_gbps * 1e9)
    return prefill, _phase("decode_token", 0.0, 0.0, read, host_t, t)


def _kv_avg(mem: MemoryBreakdown, s: PlanSettings) -> float:
    """The KV cache's bytes at its mean length over the decode steps."""
    return mem.kv_cache_bytes * (s.prompt + s.new_tokens / 2) / max(1, s.prompt + s.new_tokens)


def _decode_time(model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, cal: Calibration, spec: GpuSpec,
                 t: TimingProfile, host: dict[str, float] | None = None) -> TimeEstimate:  # fmt: skip
    c = ceilings_for(spec, s)
    if not isinstance(model, TransformerSpec):
        per = mem.weights_bytes / (cal.decode_gbps * 1e9)
        return TimeEstimate("infer", None, cal.source, c.matmul_dtype, per_token_s=per, gpu_s=per)
    prefill, token = _probed(list(_decode_phases(model, s, mem, cal, t)), host, t)
    total = prefill.total_s + max(0, s.new_tokens - 1) * token.total_s
    flops = 2 * model.active_params * s.batch * (s.prompt + s.new_tokens) / s.tp
    return TimeEstimate(
        task="infer",
        mfu=flops / (total * c.peak_tflops * 1e12) if c.peak_tflops else None,
        ceilings_source=cal.source,
        matmul_dtype=c.matmul_dtype,
        tokens_per_s=s.batch * s.new_tokens / total if total else None,
        total_s=total,
        prefill_s=prefill.total_s,
        per_token_s=token.total_s,
        gpu_s=token.gpu_s,
        host_s=token.host_s,
        # what an optimised server approaches: weights and KV cache read once per step, no host cost
        bandwidth_bound_tokens_per_s=s.batch * cal.decode_gbps * 1e9 / (mem.weights_bytes + _kv_avg(mem, s)),
        phases=[prefill.to_dict(), token.to_dict()],
        calibrated=cal.measured,
    )


def _with_bench_ceilings(cal: Calibration, spec: GpuSpec, measured: dict[str, float] | None) -> Calibration:
    """A datasheet calibration takes ``gpukit bench``'s measured large-GEMM rates and bandwidth where it has them."""
    if cal.measured or not measured:
        return cal
    gemm = dict(cal.gemm)
    for dtype in list(gemm):
        if measured.get(f"{dtype}_tflops"):
            gemm[dtype] = [(1.0, float(measured[f"{dtype}_tflops"]))]
    bw = float(measured.get("bandwidth_gbps") or cal.bandwidth_gbps)
    src = cal.source.replace("datasheet × practical fraction", "large-GEMM and bandwidth measured (gpukit bench)")
    return replace(cal, gemm=gemm, bandwidth_gbps=bw, decode_gbps=bw, source=src)


def estimate_time(
    model: ModelSpec,
    s: PlanSettings,
    mem: MemoryBreakdown,
    spec: GpuSpec,
    measured: dict[str, float] | None = None,
    work: float | None = None,
    timing: TimingProfile = TIMING,
    calibration: Calibration | None = None,
    host: dict[str, float] | None = None,
) -> TimeEstimate:
    """Time on ``spec`` GPUs; ``work`` is the number of tokens (transformers) or samples (CNNs) to train on.
    ``calibration`` defaults to the one found for ``spec`` (plan/calibration.py: user file, shipped, datasheet).
    ``host``: seconds per phase name timed by ``plan --probe-host`` (plan/probe.py), in place of the calibration's
    host floor for those phases."""
    if calibration is None or calibration.gpu_key != spec.key:  # a calibration is for its own GPU model only
        from gpukit.plan.calibration import find_calibration

        calibration = find_calibration(spec)
    cal = _with_bench_ceilings(calibration, spec, measured)
    if s.task == "train":
        est = _train_time(model, s, mem, cal, spec, timing, work, host)
    else:
        est = _decode_time(model, s, mem, cal, spec, timing, host)
    if host:
        est = replace(est, ceilings_source=est.ceilings_source + "; host floor probed on this machine")
    return replace(est, accuracy=time_accuracy(cal, spec.key, s.task, probed=bool(host)))
