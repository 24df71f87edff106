"""`plan --measure`: build the model from its config with random weights, run it, measure what the planner predicted.

Peak memory is ``torch.cuda.max_memory_allocated/reserved`` after ``reset_peak_memory_stats`` (the CUDA context is
outside both). Training: step 1 warms up (Adam allocates its state at the first ``step()``), step 2 records the
peak of each phase (forward, backward, optimizer) between synchronisations, step 3 runs under the torch profiler
(each phase's host time — its span on the host — and device time — the kernels launched in it, from any thread,
autograd's included), and the remaining steps (more for a short step: ``TIMED_S``) are timed with a CUDA event at
each phase boundary and no synchronisation in between (median per phase; the events see the stream, so a phase where
the GPU waits on the host reads the host's time). Inference: the first ``generate()`` is timed on its own (cold:
kernel plans are built on it), then warm calls of ``max_new_tokens`` and of 1 token (prefill + set-up), each once
under the profiler; per token = (warm − prefill) / (new tokens − 1). Needs torch with CUDA (and transformers for
transformer models).
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gpukit.errors import BackendUnavailable, DeviceError, PlanError
from gpukit.plan.memory import PlanSettings
from gpukit.plan.models import CnnSpec, ModelSpec, TransformerSpec

__all__ = [
    "Measurement",
    "check_db",
    "default_db_path",
    "enable_checkpointing",
    "load_ceilings",
    "measure",
    "phase_events",
    "phase_split",
    "save_validation",
]

# Where models and batches live. Tests point it at "cpu" with torch.cuda's timing/memory calls stubbed, so the
# whole path runs without a GPU; the numbers only mean something on CUDA.
DEVICE = "cuda"


@dataclass
class Measurement:
    device_name: str
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    step_s: float | None = None  # training: median of the timed steps
    step_samples_s: list[float] = field(default_factory=list)
    generate_s: float | None = None  # inference: one generate() call
    new_tokens: int | None = None
    phases: dict[str, int] = field(default_factory=dict)  # peak allocated per phase, for recalibration
    phase_s: dict[str, float] = field(default_factory=dict)  # wall per phase (events); infer: prefill, per token
    profile: dict[str, dict[str, float]] = field(default_factory=dict)  # phase → {"host_s", "device_s"}
    cold_generate_s: float | None = None  # inference: the first generate() on these shapes (set-up, apart)
    versions: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailable("--measure needs PyTorch", hint="pip install 'gpukit[torch]'") from exc
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--measure needs a CUDA GPU (PyTorch sees none)", hint="run it on a machine with a GPU")
    return torch


def _hf_model(model: TransformerSpec, s: PlanSettings, dtype: Any) -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise BackendUnavailable(
            "--measure of a transformer needs transformers", hint="pip install 'gpukit[plan]' (transformers>=4.44,<6)"
        ) from exc
    cfg = dict(model.hf_config)
    model_type = cfg.pop("model_type", "llama")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    config.use_cache = s.task == "infer"
    kwargs: dict[str, Any] = {"attn_implementation": s.attn}
    try:
        return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, **kwargs)
    except TypeError:  # transformers 4.x spells it torch_dtype
        return transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype, **kwargs)


def enable_checkpointing(module: Any, variant: str) -> None:
    """Hugging Face activation checkpointing per decoder layer, ``use_reentrant`` as asked: transformers 5 defaults
    to False (non-reentrant), 4.x to True. 5.24 renamed the call ``activation_checkpointing_enable``."""
    kwargs = {"use_reentrant": variant == "reentrant"}
    if hasattr(module, "activation_checkpointing_enable"):
        module.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        module.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def build_module(model: ModelSpec, s: PlanSettings, device: str | None = None) -> Any:
    """The real module, random weights, on ``device``, in the recipe's weight dtype."""
    import torch

    device = device or DEVICE
    dtype = torch.bfloat16 if (s.task == "infer" or s.recipe in ("bf16", "bf16-master")) else torch.float32
    if s.task == "infer" and s.dtype == "fp16":
        dtype = torch.float16
    with torch.device(device):
        if isinstance(model, TransformerSpec):
            module = _hf_model(model, s, dtype)
            if s.checkpointing:
                enable_checkpointing(module, s.checkpoint_variant)
        elif model.builder == "torchvision:resnet50":
            import torchvision

            module = torchvision.models.resnet50(num_classes=model.num_classes)
        elif model.builder == "gpukit:seed_cnn":
            from gpukit.train.models import seed_cnn

            module = seed_cnn(model.image_size, model.num_classes)
        else:
            raise PlanError("--measure needs a model it can build", hint="give a preset or a config.json, not --params")
    return module.to(device=device, dtype=dtype)


def _optimizer(torch: Any, params: Any, name: str, impl: str = "foreach") -> Any:
    """The optimizer the plan was made for; Adam(W) on the asked code path (foreach / fused / for-loop)."""
    if name in ("adamw", "adam"):
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        return cls(params, lr=1e-5, foreach=impl == "foreach", fused=impl == "fused")
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9)
    if name == "adafactor" and hasattr(torch.optim, "Adafactor"):
        return torch.optim.Adafactor(params, lr=1e-4)
    raise PlanError(f"--measure cannot build optimizer '{name}' here", hint="use --optimizer adamw, adam or sgd")


def _batch(torch: Any, model: ModelSpec, s: PlanSettings) -> tuple[Any, Any]:
    if isinstance(model, TransformerSpec):
        ids = torch.randint(0, model.vocab_size, (s.batch, s.seq), device=DEVICE)
        return ids, ids
    dtype = torch.bfloat16 if s.recipe == "bf16" else torch.float32  # the input matches the weights
    x = torch.randn(s.batch, 3, model.image_size, model.image_size, device=DEVICE, dtype=dtype)
    classes = 1 if model.num_classes == 2 else model.num_classes
    y = torch.randint(0, max(2, classes), (s.batch,), device=DEVICE)
    return x, (y.float().unsqueeze(1) if classes == 1 else y)


def _loss(torch: Any, module: Any, model: ModelSpec, x: Any, y: Any) -> tuple[Any, Any]:
    if isinstance(model, TransformerSpec):
        out = module(input_ids=x, labels=y)
        return out.loss, out
    logits = module(x)
    fn = torch.nn.functional
    loss = fn.binary_cross_entropy_with_logits(logits.float(), y) if y.dim() == 2 else fn.cross_entropy(logits, y)
    return loss, logits


PHASES = ("forward", "backward", "step")
# Timed steps: at least ``steps`` - 3, and for short steps as many as fill TIMED_S, at most MAX_TIMED. Two samples of
# a 3 ms step read 2.5 and 3.6 ms on one H100 (the seed CNN, 2026-12-05): a median of two is their mean.
TIMED_S, MAX_TIMED = 0.25, 30
REPORTED = {"forward": "forward", "backward": "backward", "step": "optimizer"}  # phase_s / profile names


def _profiled(torch: Any) -> Any:
    """The torch profiler on this device (CPU only on the CPU stand-in)."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if DEVICE == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(activities=acts)


def phase_events(events: list[Any], name: str) -> tuple[list[Any], float] | None:
    """The CPU events that started inside the ``gpukit:<name>`` range of a profile's events, and the range's span in
    seconds; None without that range. Every CPU event that started inside it counts — autograd runs the backward on
    its own thread, so children of the range would miss it."""
    ranges = [e for e in events if e.name == f"gpukit:{name}" and str(e.device_type).endswith("CPU")]
    if not ranges:
        return None
    lo, hi = min(e.time_range.start for e in ranges), max(e.time_range.end for e in ranges)
    inside = [e for e in events if str(e.device_type).endswith("CPU") and lo <= e.time_range.start <= hi
              and not e.name.startswith("gpukit:")]  # fmt: skip
    return inside, (hi - lo) / 1e6


def phase_split(prof: Any, names: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Host and device seconds of each ``gpukit:<name>`` range of a profile. Host: the range's span. Device: the
    kernels of the CPU events that started inside it (``phase_events``)."""
    events = list(prof.events())
    out: dict[str, dict[str, float]] = {}
    for name in names:
        found = phase_events(events, name)
        if found is not None:
            inside, span = found
            out[name] = {"host_s": span, "device_s": sum(e.self_device_time_total for e in inside) / 1e6}
    return out


def _run_phase(torch: Any, name: str, ctx: dict[str, Any], module: Any, model: ModelSpec, opt: Any, amp: Any) -> None:
    if name == "forward":
        with amp:
            ctx["loss"], ctx["out"] = _loss(torch, module, model, ctx["x"], ctx["y"])
    elif name == "backward":
        ctx["loss"].backward()
        del ctx["loss"], ctx["out"]
    else:
        opt.step()
        opt.zero_grad(set_to_none=True)


def _train(torch: Any, model: ModelSpec, s: PlanSettings, steps: int) -> Measurement:
    if s.recipe == "bf16-master":
        raise PlanError("--measure runs fp32, amp-bf16 and bf16; bf16-master needs a mixed-precision framework")
    if s.gpus > 1 or s.tp > 1:
        raise PlanError("--measure runs on one GPU", hint="drop --gpus/--tp to validate the single-GPU plan")
    module = build_module(model, s)
    module.train()
    opt = _optimizer(torch, module.parameters(), s.optimizer, s.optimizer_impl)
    x, y = _batch(torch, model, s)
    ctx: dict[str, Any] = {"x": x, "y": y}
    amp = torch.autocast(DEVICE, dtype=torch.bfloat16) if s.recipe == "amp-bf16" else contextlib.nullcontext()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    phases: dict[str, int] = {}
    profile: dict[str, dict[str, float]] = {}
    times: list[float] = []
    per_phase: dict[str, list[float]] = {n: [] for n in PHASES}
    total, step = max(3, steps), 0
    while step < total:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(PHASES) + 1)]
        prof = _profiled(torch) if step == 2 else contextlib.nullcontext()
        with prof:
            events[0].record()
            for k, name in enumerate(PHASES):
                if step == 1:
                    torch.cuda.synchronize()  # phase peaks of step 2 only; step 2 is not timed
                    torch.cuda.reset_peak_memory_stats()
                with torch.profiler.record_function(f"gpukit:{name}"):
                    _run_phase(torch, name, ctx, module, model, opt, amp)
                if step == 1:
                    torch.cuda.synchronize()
                    phases[f"{name}_peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated())
                    phases[f"{name}_end_allocated_bytes"] = int(torch.cuda.memory_allocated())
                events[k + 1].record()
            events[-1].synchronize()  # wait for this step's kernels before reading its time
        if step == 2:
            try:
                profile = {REPORTED[k]: v for k, v in phase_split(prof, PHASES).items()}
            except Exception as exc:  # the profile explains a time; it must not cost the measurement itself
                profile = {"error": {"message": f"{type(exc).__name__}: {exc}"[:200]}}  # type: ignore[dict-item]
        if step >= 3 or (steps <= 3 and step == 2):
            times.append(events[0].elapsed_time(events[-1]) / 1e3)
            for k, name in enumerate(PHASES):
                per_phase[name].append(events[k].elapsed_time(events[k + 1]) / 1e3)
            if len(times) == 1 and steps > 3:  # a short step gets more samples (see TIMED_S)
                total = max(total, step + min(MAX_TIMED, math.ceil(TIMED_S / max(times[0], 1e-6))))
        step += 1
    peak = max(v for k, v in phases.items() if k.endswith("peak_allocated_bytes"))
    return Measurement(
        device_name=torch.cuda.get_device_name(),
        peak_allocated_bytes=max(peak, int(torch.cuda.max_memory_allocated())),
        peak_reserved_bytes=int(torch.cuda.max_memory_reserved()),
        step_s=statistics.median(times),
        step_samples_s=times,
        phases=phases,
        phase_s={REPORTED[n]: statistics.median(v) for n, v in per_phase.items() if v},
        profile=profile,
        versions=_versions(torch),
    )


def _infer(torch: Any, model: ModelSpec, s: PlanSettings) -> Measurement:
    if not isinstance(model, TransformerSpec):
        raise PlanError("--measure of inference needs a transformer", hint="use --task train for CNNs")
    if s.dtype not in ("bf16", "fp16") or s.kv_dtype not in ("bf16", "fp16"):
        raise PlanError("--measure generates in bf16/fp16 only (quantised kernels are not built in)")
    module = build_module(model, s).eval()
    ids = torch.randint(0, model.vocab_size, (s.batch, s.prompt), device=DEVICE)
    # eos_token_id=None: random weights must not stop early, so every call makes exactly new_tokens tokens.
    kwargs = {"do_sample": False, "use_cache": True, "pad_token_id": 0, "eos_token_id": None}
    n = max(2, s.new_tokens)

    def timed(tokens: int) -> tuple[float, Any]:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = module.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **kwargs)
        end.record()
        end.synchronize()  # the call's last kernels, before reading its time
        return start.elapsed_time(end) / 1e3, out

    with torch.inference_mode():
        # The first generate() builds a cuDNN attention plan per KV length and ran 5-9x slower per token on an H200
        # (50 vs 5.4 ms for GPT-2): set-up, reported apart as the cold call.
        cold, _ = timed(n)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = int(torch.cuda.memory_allocated())
        warm = [timed(n) for _ in range(2)]
        prefill = statistics.median(timed(1)[0] for _ in range(2))
        split = {}
        for name, tokens in (("generate", n), ("prefill", 1)):
            with _profiled(torch) as prof, torch.profiler.record_function(f"gpukit:{name}"):
                module.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **kwargs)
                torch.cuda.synchronize()
            split.update(phase_split(prof, (name,)))
    total = statistics.median(w[0] for w in warm)
    profile = {"prefill": split.get("prefill", {})}
    if "generate" in split and "prefill" in split:
        profile["decode_token"] = {k: (split["generate"][k] - split["prefill"][k]) / (n - 1) for k in split["prefill"]}
    return Measurement(
        device_name=torch.cuda.get_device_name(),
        peak_allocated_bytes=int(torch.cuda.max_memory_allocated()),
        peak_reserved_bytes=int(torch.cuda.max_memory_reserved()),
        generate_s=total,
        new_tokens=int(warm[0][1].shape[1] - s.prompt),
        phases={"before_generate_allocated_bytes": base},
        phase_s={"prefill": prefill, "decode_token": (total - prefill) / (n - 1)},
        profile=profile,
        cold_generate_s=cold,
        versions=_versions(torch),
    )


def _versions(torch: Any) -> dict[str, str]:
    v = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}
    with contextlib.suppress(ImportError):
        import transformers

        v["transformers"] = transformers.__version__
    return v


def measure(model: ModelSpec, s: PlanSettings, steps: int = 5) -> Measurement:
    """Run the real thing on this machine's GPU and return its peak memory and time."""
    torch = _torch()
    if isinstance(model, CnnSpec) and model.family != "cnn":
        raise PlanError("--measure needs an architecture", hint="give a preset or config.json instead of --params")
    torch.manual_seed(0)
    gc.collect()  # a previous model caught in a reference cycle would still hold memory and inflate the peak
    torch.cuda.empty_cache()
    _release_cublas_workspaces(torch)
    # what is allocated already (an earlier model in this process, a notebook's tensors) is not this run's: the plan
    # predicts what the run itself allocates
    base = int(torch.cuda.memory_allocated())
    try:
        m = _train(torch, model, s, steps) if s.task == "train" else _infer(torch, model, s)
        return _without_base(m, base)
    except torch.cuda.OutOfMemoryError as exc:
        raise DeviceError(
            f"out of GPU memory while measuring: {str(exc).splitlines()[0]}",
            hint="the plan does not fit this GPU; lower --batch/--seq",
        ) from exc
    finally:
        gc.collect()
        torch.cuda.empty_cache()


def _release_cublas_workspaces(torch: Any) -> None:
    """Free the cuBLAS workspaces an earlier GEMM in this process left allocated (65-115 MiB on an H200; the plan
    counts them), so that the run allocates its own and they are in its peak, not in the base taken off it. Without
    this, every configuration after the first in one process read about 70 MiB low
    (benchmarks/plan-error_h100_2026-12-05.md: +7 to +16 % on generate() rows under 1.2 GiB)."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)  # private; absent from some builds
    if clear is not None:
        clear()


def _without_base(m: Measurement, base: int) -> Measurement:
    """``m`` with the bytes allocated before the run taken off its allocated peaks (reserved stays process-wide)."""
    phases = {k: v - base if k.endswith("_allocated_bytes") else v for k, v in m.phases.items()}
    return replace(m, peak_allocated_bytes=m.peak_allocated_bytes - base, phases=phases)


# --- results history (the one gpukit.history, shared with gpukit bench) ---


def default_db_path() -> Path:
    """Where `plan --measure` records its validations: the same file as `gpukit bench` (gpukit.history)."""
    from gpukit.history import default_db_path as history_default

    return history_default()


def check_db(db_path: str | Path | None = None) -> str:
    """Validate (or create) the history before measuring, so a bad ``--db`` costs no measurement; returns where it
    is (a path, or a server's URL without its password)."""
    from gpukit.history import open_history

    with open_history(db_path) as history:
        return history.location


def save_validation(record: dict[str, Any], db_path: str | Path | None = None) -> str:
    """Append one predicted/measured pair to the history's ``plan_validations``; if the history cannot take it, the
    record goes to a JSON file beside it (`gpukit history import FILE`) and StoreError says where."""
    from gpukit.errors import StoreError
    from gpukit.history import open_history, write_fallback

    with open_history(db_path) as history:
        try:
            history.save_validation(record)
        except StoreError as exc:
            kept = write_fallback(history, "plan_validation", record)
            raise StoreError(f"{exc.message}; the validation was written to {kept}",
                             hint=f"gpukit history import {kept}") from exc  # fmt: skip
        return history.location


def load_ceilings(db_path: str | Path | None = None, device_name: str | None = None) -> dict[str, Any] | None:
    """This machine's measured ceilings from the `gpukit bench` history, or None when there are none (or the file
    is not a usable history: plain `plan` runs without one; `--measure` validates it with :func:`check_db`).
    Returns e.g. ``{"device": "NVIDIA H200", "bandwidth_gbps": 4175.0, "bf16_tflops": 750.0}``.
    """
    from gpukit.errors import ConfigError
    from gpukit.history import open_history

    try:
        with open_history(db_path, create=False) as history:
            return history.latest_ceilings(device_name)
    except ConfigError:
        return None
