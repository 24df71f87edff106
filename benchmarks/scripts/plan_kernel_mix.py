"""Where a training step's GPU time goes, by kind of kernel and phase: the evidence for issue 25's time model.

Run on a CUDA machine from the repository root (one H200: about a minute):

    PYTHONPATH=src python3 benchmarks/scripts/plan_kernel_mix.py --out "$OUT/kernel-mix.json"

For each configuration (``CONFIGS``: a spread of the error grid's families, precisions and sizes) the module that
``plan --measure`` builds runs three warm steps, then one step under the torch profiler with a range per phase
(forward, backward, optimizer). Every kernel launched inside a phase is put in one class by its name (``CLASSES``:
GEMM, convolution, attention, normalisation, softmax/loss, reduction, optimizer, copy/layout, element-wise, other)
and summed: device milliseconds and launches per class and phase, the phase's host span, and the GPU time the
planner predicts for the phase's GEMM / attention / memory parts (shipped calibration) beside it. It prints one line
per phase and writes the whole as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_error_grid as grid

T = dict
CONFIGS: list[tuple[str, dict[str, Any], int | None]] = [
    ("seed-cnn", T(task="train", recipe="amp-bf16", batch=512), None),
    ("resnet50", T(task="train", recipe="bf16", batch=32), None),
    ("resnet50", T(task="train", recipe="bf16", batch=128), None),
    ("resnet50", T(task="train", recipe="fp32", batch=64), 192),
    ("resnet50", T(task="train", recipe="amp-bf16", batch=64), None),
    ("gpt2", T(task="train", recipe="bf16", batch=16, seq=512), None),
    ("gpt2", T(task="train", recipe="amp-bf16", batch=64, seq=128), None),
    ("gpt2-medium", T(task="train", recipe="fp32", batch=8, seq=1024), None),
    ("qwen2-0.5b", T(task="train", recipe="amp-bf16", batch=16, seq=256), None),
    ("qwen2-0.5b", T(task="train", recipe="bf16", batch=4, seq=2048), None),
    ("tinyllama-1.1b", T(task="train", recipe="amp-bf16", batch=8, seq=512), None),
    ("tinyllama-1.1b", T(task="train", recipe="bf16", batch=8, seq=2048), None),
]

# first match wins: normalisation before convolution (cuDNN's batch-norm kernels are cudnn::bn_*), convolution before
# GEMM (cuDNN's implicit-GEMM kernels carry "gemm" in their names), attention before GEMM (cuDNN's SDPA)
CLASSES: list[tuple[str, str]] = [
    ("norm", r"layer_norm|layernorm|rms_?norm|batch_norm|batchnorm|bn_fw|bn_bw|welford"),
    ("attention", r"sdpa|flash|fmha|attention|attn"),
    ("conv", r"conv|fprop|dgrad|wgrad|implicit_gemm|nchwtonhwc|nhwctonchw|cudnn::"),
    ("gemm", r"nvjet|gemm|cutlass|xmma|cublas|sm90_|sm80_|ampere_|splitk"),
    ("softmax_loss", r"softmax|nll|cross_entropy|log_sum|logsumexp"),
    ("optimizer", r"multi_tensor|adam|fused_|foreach"),
    ("reduce", r"reduce"),
    ("copy", r"copy|memcpy|memset|cat|index|gather|scatter|embedding|transpose|permute|fill"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|functor"),
]
_COMPILED = [(name, re.compile(rx)) for name, rx in CLASSES]


def kernel_class(name: str) -> str:
    low = name.lower()
    for cls, rx in _COMPILED:
        if rx.search(low):
            return cls
    return "other"


def phase_kernels(events: list[Any], phase: str) -> tuple[dict[str, dict[str, float]], float, list[tuple[str, float]]]:
    """({class: {"ms", "launches"}}, host ms, the ten longest kernels) of the ``gpukit:<phase>`` range."""
    from gpukit.plan.measure import phase_events

    found = phase_events(events, phase)
    if found is None:
        raise RuntimeError(f"the profile has no gpukit:{phase} range")
    inside, span = found
    out: dict[str, dict[str, float]] = {}
    per_name: dict[str, float] = {}
    for e in inside:
        for k in getattr(e, "kernels", []) or []:
            ms = k.duration / 1e3
            slot = out.setdefault(kernel_class(k.name), {"ms": 0.0, "launches": 0})
            slot["ms"] += ms
            slot["launches"] += 1
            per_name[k.name] = per_name.get(k.name, 0.0) + ms
    top = sorted(per_name.items(), key=lambda kv: -kv[1])[:10]
    return out, span * 1e3, [(n[:90], round(v, 3)) for n, v in top]


def predicted_parts(name: str, kw: dict[str, Any], image: int | None) -> dict[str, dict[str, float]]:
    from gpukit.hardware.specs import get_spec
    from gpukit.plan.compute import estimate_time
    from gpukit.plan.memory import PlanSettings, estimate_memory

    model = grid.model_for(name, image)
    s = PlanSettings(**kw)
    est = estimate_time(model, s, estimate_memory(model, s), get_spec("h200-sxm"))
    return {p["name"]: {k: p[k] * 1e3 for k in ("gemm_s", "attention_s", "memory_s", "host_s")} for p in est.phases}


def profile_one(name: str, kw: dict[str, Any], image: int | None) -> dict[str, Any]:
    import torch

    from gpukit.plan import measure as m
    from gpukit.plan.memory import PlanSettings

    model = grid.model_for(name, image)
    s = PlanSettings(**kw)
    module = m.build_module(model, s)
    module.train()
    opt = m._optimizer(torch, module.parameters(), s.optimizer, s.optimizer_impl)
    x, y = m._batch(torch, model, s)
    ctx: dict[str, Any] = {"x": x, "y": y}
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if s.recipe == "amp-bf16" else contextlib.nullcontext()
    for _ in range(3):
        for phase in m.PHASES:
            m._run_phase(torch, phase, ctx, module, model, opt, amp)
    torch.cuda.synchronize()
    with m._profiled(torch) as prof:
        for phase in m.PHASES:
            with torch.profiler.record_function(f"gpukit:{phase}"):
                m._run_phase(torch, phase, ctx, module, model, opt, amp)
        torch.cuda.synchronize()
    row: dict[str, Any] = {"config": grid.label(name, kw, image), "phases": {}}
    predicted = predicted_parts(name, kw, image)
    events = list(prof.events())  # once: each phase reads its own range of them
    for phase in m.PHASES:
        classes, host_ms, top = phase_kernels(events, phase)
        reported = m.REPORTED[phase]
        row["phases"][reported] = {"classes": classes, "host_ms": host_ms, "top": top,
                                   "predicted_ms": predicted.get(reported, {})}  # fmt: skip
    del module, opt, ctx, x, y
    torch.cuda.empty_cache()
    return row


def line(config: str, phase: str, p: dict[str, Any]) -> str:
    total = sum(c["ms"] for c in p["classes"].values())
    launches = sum(c["launches"] for c in p["classes"].values())
    parts = ", ".join(f"{k} {v['ms']:.1f}/{int(v['launches'])}" for k, v in
                      sorted(p["classes"].items(), key=lambda kv: -kv[1]["ms"]))  # fmt: skip
    pred = p["predicted_ms"]
    shown = " ".join(f"{k[:-2]} {v:.1f}" for k, v in pred.items())
    return f"{config:44s} {phase:9s} device {total:7.1f} ms, {launches:5d} kernels | {parts} | predicted {shown}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA device\nhint: run this on a GPU machine", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "rows": []}  # fmt: skip
    for name, kw, image in CONFIGS:
        try:
            row = profile_one(name, kw, image)
        except Exception:  # one configuration's failure must not lose the others
            row = {"config": grid.label(name, kw, image), "error": traceback.format_exc()[-1500:]}
            print(row["error"], file=sys.stderr)
        doc["rows"].append(row)
        for phase, p in row.get("phases", {}).items():
            print(line(row["config"], phase, p), flush=True)
        args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
