"""Peak GPU memory per device for a training step or a generation, broken down by what holds it.

Training peak (steady state, step ≥ 2, ``zero_grad(set_to_none=True)``): the largest of
  (a) start of backward: weights + master + optimizer state + activations + the loss's logits transient,
  (b) end of backward: weights + master + optimizer state + every gradient + what backward's last node holds on
      top of them (a tied embedding's gradient sum; the logits the caller's model output still references), and
  (c) optimizer step: weights + master + optimizer state + gradients + the optimizer's temporary
      (foreach AdamW allocates one sqrt(v) copy of the state; fused nothing; for-loop one parameter's worth),
because during backward activations are freed about as fast as gradients are allocated.
Inference peak: weights + KV cache + the prefill's one-layer working set.
All sizes are bytes; ``overhead_bytes`` is memory outside PyTorch's allocated count (CUDA context, NCCL,
allocator fragmentation) so ``total_bytes`` is what must fit on the device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpukit.errors import PlanError
from gpukit.plan.models import CnnSpec, ModelSpec, TransformerSpec
from gpukit.plan.profiles import CNN_PROFILES, profile_for

__all__ = ["MemoryBreakdown", "PlanSettings", "estimate_memory", "kv_cache_bytes"]

GiB = 1024**3
CUDA_CONTEXT_BYTES = int(0.75 * GiB)  # REFERENCE: CUDA context and kernels ≈ 0.5–1 GiB per process
NCCL_BYTES = int(1.5 * GiB)  # REFERENCE: NCCL initialisation ≈ 1.5 GiB more per rank
FRAGMENTATION = 0.05
# cuBLAS/cuDNN workspaces come from PyTorch's caching allocator, so they are in the allocated count. cuBLAS keeps one
# per thread's handle and stream (32 MiB by default on Hopper). A training step runs GEMMs on two threads, the forward
# on the caller's and the backward on autograd's device thread: 65–115 MiB measured on an H200 with torch 2.11
# beside weights + optimizer state. generate() runs them on one: with the training figure its rows read +0.4 to
# +9.6 % over, with half −0.5 to +2.3 % (ten rows on two H100 hosts, benchmarks/plan-probe_h100_2026-12-05.md).
WORKSPACE_BYTES = 80 * 1024**2  # a training step's

RECIPES = ("fp32", "amp-bf16", "bf16-master", "bf16")
OPTIMIZERS = ("adamw", "adam", "sgd", "adafactor", "adam8bit")  # adam: AdamW's memory (the same two moments)
CHECKPOINT_VARIANTS = ("non-reentrant", "reentrant")  # use_reentrant=False (HF's default in transformers 5) | True
OPTIMIZER_IMPLS = ("foreach", "fused", "for-loop")  # PyTorch's three Adam(W) code paths; foreach is its default
SHARDS = ("ddp", "zero1", "zero2", "zero3", "fsdp")
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
INT4_GROUP_OVERHEAD = 4 / 128  # an fp16 scale and zero point per group of 128 weights

# Upper bounds a request must stay under: beyond them a figure is not a plan but an artefact (--gpus 10⁹ printed
# 5.4 × 10¹² tokens/s). The largest training clusters have about 10⁵ GPUs; tensor parallelism stays inside a node or
# a rack; context lengths of published models are at most a few million tokens.
LIMITS = {
    "--gpus": 131_072,
    "--tp": 1_024,
    "--batch": 1_048_576,
    "--seq": 16_777_216,
    "--prompt": 16_777_216,
    "--new-tokens": 16_777_216,
}
LIMIT_WHY = {
    "--gpus": "the largest training clusters have about 100,000 GPUs",
    "--tp": "tensor parallelism splits heads inside one node or rack",
    "--batch": "the micro-batch is per GPU: a few to a few thousand sequences or images",
    "--seq": "published context lengths are at most a few million tokens",
    "--prompt": "published context lengths are at most a few million tokens",
    "--new-tokens": "published context lengths are at most a few million tokens",
}


@dataclass(frozen=True)
class PlanSettings:
    task: str = "train"  # train | infer
    recipe: str = "amp-bf16"
    optimizer: str = "adamw"
    optimizer_impl: str = "foreach"  # foreach | fused | for-loop: what Adam(W)'s step allocates on top of its state
    batch: int = 1
    seq: int = 2048
    checkpointing: bool = False
    checkpoint_variant: str = "non-reentrant"  # torch.utils.checkpoint use_reentrant=False | reentrant (True)
    gpus: int = 1
    shard: str = "ddp"
    tp: int = 1
    attn: str = "sdpa"  # sdpa | eager
    dtype: str = "bf16"  # inference weights
    prompt: int = 512
    new_tokens: int = 128
    kv_dtype: str = "bf16"

    @property
    def mode(self) -> str:
        """Activation precision mode of the recipe: fp32, amp or bf16."""
        return {"fp32": "fp32", "amp-bf16": "amp", "bf16-master": "bf16", "bf16": "bf16"}[self.recipe]

    @property
    def dp(self) -> int:
        return self.gpus // self.tp


@dataclass(frozen=True)
class MemoryBreakdown:
    weights_bytes: int
    gradients_bytes: int
    master_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    logits_bytes: int
    kv_cache_bytes: int
    workspace_bytes: int
    overhead_bytes: int
    peak_allocated_bytes: int  # what torch.cuda.max_memory_allocated should read
    reserved_bytes: int  # what torch.cuda.max_memory_reserved should read (allocated + fragmentation)
    total_bytes: int  # everything that must fit on one GPU
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["notes"] = list(self.notes)
        return d


def pool_index_extra_bytes(model: CnnSpec, s: PlanSettings) -> float:
    """What a CNN's max-pool indices (int64: 8 bytes in every precision) add to the activations beyond the two
    elements' worth each that ``act_elems_per_sample`` gives them (at the precision's bytes per element)."""
    return model.pool_index_elems * s.batch * (8 - 2 * CNN_PROFILES[s.mode].bytes_per_elem)


def default_seq(model: ModelSpec) -> int:
    """The training sequence when none is given: 2048 tokens, or a model's learned positions where fewer (GPT-2)."""
    return min(2048, getattr(model, "learned_positions", 0) or 2048)


def validate(model: ModelSpec, s: PlanSettings) -> None:
    """Impossible combinations raise PlanError (exit 2)."""
    checks = [
        (s.task in ("train", "infer"), f"--task must be train or infer, not '{s.task}'"),
        (s.recipe in RECIPES, f"--recipe must be one of {', '.join(RECIPES)}"),
        (s.optimizer in OPTIMIZERS, f"--optimizer must be one of {', '.join(OPTIMIZERS)}"),
        (s.shard in SHARDS, f"--shard must be one of {', '.join(SHARDS)}"),
        (
            s.task == "train" or (s.dtype in DTYPE_BYTES and s.dtype != "fp32"),
            "--dtype must be bf16|fp16|fp8|int8|int4",
        ),
        (s.kv_dtype in ("bf16", "fp16", "fp8", "int8", "fp32"), "--kv-dtype must be bf16|fp16|fp8|int8|fp32"),
        (s.attn in ("sdpa", "eager"), "--attn must be sdpa or eager"),
        (
            s.checkpoint_variant in CHECKPOINT_VARIANTS,
            f"--checkpointing-variant must be one of {', '.join(CHECKPOINT_VARIANTS)}",
        ),
    ]
    checks.append(
        (s.optimizer_impl in OPTIMIZER_IMPLS, f"--optimizer-impl must be one of {', '.join(OPTIMIZER_IMPLS)}")
    )
    sizes = {"--batch": s.batch, "--seq": s.seq, "--gpus": s.gpus, "--tp": s.tp, "--prompt": s.prompt}
    checks += [(n >= 1, f"{flag} must be at least 1, not {n}") for flag, n in sizes.items()]
    checks.append((s.new_tokens >= 0, f"--new-tokens must be 0 or more, not {s.new_tokens}"))
    for ok, message in checks:
        if not ok:
            raise PlanError(message)
    sizes["--new-tokens"] = s.new_tokens
    for flag, n in sizes.items():
        if n > LIMITS[flag]:
            raise PlanError(
                f"{flag} {n:,} is above the physically meaningful {LIMITS[flag]:,}",
                hint=LIMIT_WHY[flag],
            )
    if s.gpus % s.tp:  # after the size checks: --tp 0 must not divide by zero
        raise PlanError(f"--gpus {s.gpus} is not a multiple of --tp {s.tp}")
    tokens = s.seq if s.task == "train" else s.prompt + s.new_tokens
    if isinstance(model, TransformerSpec) and model.learned_positions and tokens > model.learned_positions:
        what = "--seq" if s.task == "train" else "--prompt + --new-tokens"
        raise PlanError(
            f"{what} {tokens:,} is past {model.name}'s {model.learned_positions:,} learned positions",
            hint=f"a model with a position table (GPT-2) takes at most {model.learned_positions:,} tokens; "
            "use a shorter sequence or a model with rotary positions",
        )
    if s.task == "infer" and isinstance(model, CnnSpec) and model.family == "cnn":
        raise PlanError("inference planning covers transformers", hint="plan CNNs with --task train")
    if s.tp > 1:
        if not isinstance(model, TransformerSpec):
            raise PlanError("--tp needs a transformer model", hint="use --gpus with --shard for CNNs")
        if model.num_heads % s.tp or (model.num_kv_heads % s.tp and s.tp % model.num_kv_heads):
            raise PlanError(
                f"--tp {s.tp} does not divide {model.num_heads} attention heads / {model.num_kv_heads} KV heads",
                hint="tensor parallelism splits heads: pick a --tp that divides both head counts",
            )


def _state_bytes(model: ModelSpec, s: PlanSettings) -> tuple[float, float, float, float, float]:
    """Per-parameter-set bytes (weights, grads, master, optimizer, optimizer temporary) before sharding."""
    p = float(model.params)
    w = 2.0 if s.recipe in ("bf16", "bf16-master") else 4.0
    master = 4.0 if s.recipe == "bf16-master" else 0.0
    state = 2.0 if s.recipe == "bf16" else 4.0  # optimizer state follows the (master) weight dtype
    if s.optimizer in ("adamw", "adam"):  # Adam and AdamW keep the same two moments
        opt, temp = 2 * state * p, _adam_temporary(model, s, state)
    elif s.optimizer == "sgd":
        opt, temp = state * p, 0.0  # momentum buffer
    elif s.optimizer == "adam8bit":
        opt, temp = 2 * p * (1 + 4 / 2048), 0.0  # two 8-bit moments, an fp32 absmax per 2048-block
    else:  # adafactor: factored second moment, no first moment
        opt, temp = _adafactor_bytes(model, state), 0.0
    return w * p, w * p, master * p, opt, temp


def _adam_temporary(model: ModelSpec, s: PlanSettings, state: float) -> float:
    """What Adam(W)'s ``step()`` allocates beyond its state. ``foreach`` (PyTorch's default) computes
    ``sqrt(exp_avg_sq)`` for every tensor at once: one temporary the size of one moment. ``fused`` does the whole
    update in one kernel per tensor group: nothing. The ``for-loop`` path makes that temporary one parameter at a
    time: the largest parameter tensor (a transformer's embedding or MLP matrix; for a CNN, without its module at
    hand, its parameters spread evenly over its weight layers)."""
    if s.optimizer_impl == "fused":
        return 0.0
    if s.optimizer_impl == "foreach":
        return state * model.params
    if isinstance(model, TransformerSpec):
        return state * max(r * c for r, c, _ in model.matrix_shapes())
    return state * model.params / max(1, model.weight_layers)


def _adafactor_bytes(model: ModelSpec, state: float) -> float:
    if isinstance(model, TransformerSpec):
        shapes = model.matrix_shapes()
        matrix = sum(r * c * n for r, c, n in shapes)
        factored = sum((r + c) * n for r, c, n in shapes)
        return state * (factored + max(model.params - matrix, 0))  # vectors keep a full second moment
    return state * 2 * model.params**0.5  # no shapes known: one square matrix, a loose floor


def activation_bytes(model: ModelSpec, s: PlanSettings) -> tuple[float, float, list[str]]:
    """(activations, logits transient) bytes on one GPU for one training step."""
    notes: list[str] = []
    if isinstance(model, CnnSpec):
        if model.family != "cnn":
            notes.append("--params gives model states only: activations are not modelled")
            return 0.0, 0.0, notes
        prof = CNN_PROFILES[s.mode]
        acts = model.act_elems_per_sample * s.batch * prof.bytes_per_elem
        extra = model.backward_extra if model.backward_extra is not None else prof.backward_extra
        index_fix = pool_index_extra_bytes(model, s)
        if s.checkpointing:
            notes.append("checkpointing is not modelled for CNNs: activations as without it")
        if s.recipe == "amp-bf16":
            acts += 2.0 * model.params  # autocast keeps bf16 copies of the weights for backward
        return acts + index_fix, acts * extra, notes
    m, p = model, profile_for(model.family, s.mode)
    sb = s.seq * s.batch
    layer = sb * (
        p.per_h * m.hidden_size
        + p.per_i * m.intermediate_size * m.experts_per_token
        + p.per_kv * m.num_kv_heads * m.head_dim
    )
    if s.attn == "eager":
        layer += p.eager_scores * m.num_heads * s.seq * sb
    elif m.num_kv_heads < m.num_heads:  # SDPA's fp32 path has no fused GQA kernel: the math fallback keeps probs
        layer += p.gqa_fp32_scores * m.num_heads * s.seq * sb
    layer *= p.scale
    if s.tp > 1:  # Megatron TP without sequence parallelism: norms/residual replicated, the rest split
        layer *= 0.3 + 0.7 / s.tp
    resid = 2.0 if s.mode == "bf16" else 4.0
    logits = p.logits * sb * m.vocab_size / s.tp
    if s.checkpointing:  # each layer keeps its input; one layer is recomputed at a time, after the loss's peak
        acts = m.num_layers * resid * sb * m.hidden_size
        logits = max(logits, layer)
        notes.append("checkpointing: one layer input kept per layer, one layer recomputed at a time")
    else:
        acts = m.num_layers * layer
    acts += resid * sb * m.hidden_size * 2  # embeddings output and final norm input
    if s.recipe == "amp-bf16":  # autocast's bf16 weight copies, saved for backward (recomputed layers' are not)
        copied = m.vocab_size * m.hidden_size if s.checkpointing else model.params
        acts += 2.0 * copied / s.tp
        notes.append("amp-bf16 keeps bf16 copies of the weights for backward (2 bytes/param, in activations)")
    return acts, logits, notes


def backward_end_bytes(model: ModelSpec, s: PlanSettings) -> tuple[float, list[str]]:
    """Bytes alive at the end of backward on top of the (final) gradients, on one GPU.

    Two terms, both for transformers (a CNN's are its batch × classes logits: negligible):

    * **Tied embedding gradient sum.** With ``tie_word_embeddings`` the input embedding and the output head are one
      leaf tensor (vocab × hidden). Its head gradient is made early in backward and waits in autograd's input buffer
      until the embedding's dense gradient arrives at the very end; the engine then adds the two out of place. For a
      moment the head gradient, the embedding gradient and their sum coexist: two vocab × hidden tensors in the
      gradient dtype beyond the one that becomes ``.grad``. Measured: 3 × vocab·hidden live during backward against
      1 × at its end (torch 2.14 CPU, profiler memory events; untied: 2 × throughout, the two ``.grad``s).
    * **Logits the caller still holds.** ``out = model(ids, labels=ids); out.loss.backward()`` — how training loops
      and ``--measure`` call a causal LM — keeps ``out.logits`` (batch × seq × vocab in the activation dtype) alive
      until backward returns.

    On the H200 (torch 2.11, plan_knobs_h200.py, 2026-12-01) Qwen2-0.5B bf16 b1 × 128 peaked in backward 584.2 MB
    above its end-of-backward gradients: 2 × 272.3 MB (vocab × hidden, bf16) + 38.9 MB (b·s·V bf16) + 0.7 MB.
    Where the loss's logits are large (b8 × 512) the start of backward stays the peak, so the term changes nothing.
    """
    if not isinstance(model, TransformerSpec):
        return 0.0, []
    grad = 2.0 if s.recipe in ("bf16", "bf16-master") else 4.0  # gradients take the weight dtype
    held = (4.0 if s.mode == "fp32" else 2.0) * s.batch * s.seq * model.vocab_size / s.tp  # vocab-parallel head
    if not model.tied_embeddings:
        return held, []
    tied = 2 * grad * model.vocab_size * model.hidden_size / s.tp
    return tied + held, ["tied embeddings: head and embedding gradients summed out of place at the end of backward"]


def kv_cache_bytes(model: TransformerSpec, batch: int, tokens: int, kv_dtype: str = "bf16") -> int:
    """2 (K and V) · L · k · d · tokens · batch · bytes. Llama-2-7B in bf16: 512 KiB per token."""
    return int(2 * model.num_layers * model.num_kv_heads * model.head_dim * tokens * batch * DTYPE_BYTES[kv_dtype])


def _finish(parts: dict[str, float], peak: float, s: PlanSettings, notes: list[str]) -> MemoryBreakdown:
    workspace = WORKSPACE_BYTES if s.task == "train" else WORKSPACE_BYTES // 2  # GEMMs on two threads, or one
    peak += workspace
    overhead = CUDA_CONTEXT_BYTES + (NCCL_BYTES if s.gpus > 1 else 0) + FRAGMENTATION * peak
    return MemoryBreakdown(
        **{k: int(v) for k, v in parts.items()},
        workspace_bytes=workspace,
        overhead_bytes=int(overhead),
        peak_allocated_bytes=int(peak),
        reserved_bytes=int(peak * (1 + FRAGMENTATION)),
        total_bytes=int(peak + overhead),
        notes=tuple(notes),
    )


def _sharded_weights(model: ModelSpec, w: float, dp: int) -> tuple[float, str]:
    """ZeRO-3 / FSDP weights on one GPU: its 1/dp shard plus the gathered unit in flight and the next prefetched.

    The unit is one decoder layer of a transformer, one conv/linear layer of a CNN. A bare ``--params`` count has no
    layers, so its in-flight unit is not known: only the shard is counted, and the note says so. Never more than the
    unsharded weights (the whole model gathered at once is what no sharding costs)."""
    if isinstance(model, TransformerSpec):
        unit = w * model.layer_params() / model.params
    elif model.family == "cnn":
        unit = w / max(1, model.weight_layers)
    else:
        return w / dp, "zero3/fsdp: weights sharded; a bare --params count has no layers, so the gathered layer in "
        "flight is not counted (give a preset or config.json for it)"
    return min(w, w / dp + 2 * unit), "zero3/fsdp: weights sharded, one gathered layer in flight plus one prefetched"


def estimate_training(model: ModelSpec, s: PlanSettings) -> MemoryBreakdown:
    w, g, master, opt, temp = _state_bytes(model, s)
    w, g, master, opt, temp = (x / s.tp for x in (w, g, master, opt, temp))
    notes: list[str] = []
    dp = s.dp
    shard = "zero3" if s.shard == "fsdp" else s.shard
    if dp > 1 and shard in ("zero1", "zero2", "zero3"):
        opt, master, temp = opt / dp, master / dp, temp / dp
    if dp > 1 and shard in ("zero2", "zero3"):
        g /= dp
    if dp > 1 and shard == "zero3":
        w, note = _sharded_weights(model, w, dp)
        notes.append(note)
    buckets = g if dp > 1 and shard == "ddp" else 0.0
    if buckets:
        notes.append("ddp: gradient buckets hold a second copy of the gradients (counted in gradients)")
    acts, logits, act_notes = activation_bytes(model, s)
    notes += act_notes
    end_extra, end_notes = backward_end_bytes(model, s)
    notes += end_notes
    states = w + master + opt
    backward_start = states + acts + logits
    backward_end = states + g + buckets + end_extra
    optimizer_step = states + g + buckets + temp
    peak = max(backward_start, backward_end, optimizer_step)
    parts = {
        "weights_bytes": w,
        "gradients_bytes": g + buckets,
        "master_bytes": master,
        "optimizer_bytes": opt,
        "activations_bytes": acts,
        "logits_bytes": logits,
        "kv_cache_bytes": 0.0,
    }
    if backward_start >= max(backward_end, optimizer_step):
        notes.append("peak at start of backward (activations + logits)")
    elif backward_end >= optimizer_step:
        notes.append("peak at end of backward (all gradients + the last node's temporaries)")
    else:
        notes.append("peak in optimizer step (gradients + optimizer temporary)")
    return _finish(parts, peak, s, notes)


def estimate_inference(model: ModelSpec, s: PlanSettings) -> MemoryBreakdown:
    notes: list[str] = []
    per = DTYPE_BYTES[s.dtype] + (INT4_GROUP_OVERHEAD if s.dtype == "int4" else 0.0)
    if isinstance(model, TransformerSpec):
        head = model.head_params
        w = (head * 2.0 + (model.params - head) * per) / s.tp
        if per < 2:
            notes.append("embeddings and output head kept in 16-bit")
        tokens = s.prompt + s.new_tokens
        kv = kv_cache_bytes(model, s.batch, tokens, s.kv_dtype) / s.tp
        h, i = model.hidden_size, model.intermediate_size * model.experts_per_token
        # Prefill working set of one layer (no autograd): residual, norm temporaries, and the MLP's act/up/product
        # in 16-bit — measured 8·h + 6·i bytes per prompt token on an H200.
        acts = s.batch * s.prompt * (8 * h + 6 * i) / s.tp
        logits = s.batch * model.vocab_size * (2.0 + 4.0)  # last-position logits (generate keeps one), fp32 copy
    else:  # a CNN forward without autograd holds about two activations at a time; a bare count holds nothing
        w, kv, logits = model.params * per, 0.0, 0.0
        acts = 2.0 * model.act_elems_per_sample * s.batch * per / 4 if model.family == "cnn" else 0.0
    peak = w + kv + acts + logits
    parts = {
        "weights_bytes": w,
        "gradients_bytes": 0.0,
        "master_bytes": 0.0,
        "optimizer_bytes": 0.0,
        "activations_bytes": acts,
        "logits_bytes": logits,
        "kv_cache_bytes": kv,
    }
    return _finish(parts, peak, s, notes)


def estimate_memory(model: ModelSpec, s: PlanSettings) -> MemoryBreakdown:
    validate(model, s)
    return estimate_training(model, s) if s.task == "train" else estimate_inference(model, s)
