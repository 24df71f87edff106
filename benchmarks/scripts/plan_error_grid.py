"""Measure the planner's error table on one GPU: the calibration grid, then ≥ 30 configurations, smallest first.

Run on a CUDA machine from the repository root (one H200: about 4 minutes):

    PYTHONPATH=src python3 benchmarks/scripts/plan_error_grid.py --out "$OUT" --budget-s 270

1. ``gpukit plan --calibrate``'s grid (plan/calibrate.py) → ``$OUT/calibration.json``.
2. Every configuration of CONFIGS through ``plan.measure.measure`` (the code ``plan --measure`` runs: random
   weights from the config, per-phase peaks, a profiled step, event-timed phases; generate(): cold call apart,
   warm calls, prefill) → one JSON line per configuration in ``$OUT/rows.jsonl``, written as it goes, so a timeout
   keeps what was measured. It stops starting new configurations after ``--budget-s``.

Each row carries ``predicted_before``: the committed model's prediction (shipped calibration), made before the row is
measured. benchmarks/scripts/plan_error_table.py fits the time model's few constants on the fit set and writes the
table with the held-out rows apart (``--no-fit``: the shipped constants). A held-out row is never read by a fit.

One held-out set alone (``--set N``: NEW_HELD_OUT_N, each never measured before it was chosen; 1 takes 75 s on an
H200; the flags ``--only-new`` … ``--only-new-4`` of earlier runs' commands are ``--set 1`` … ``--set 4``):

    PYTHONPATH=src python3 benchmarks/scripts/plan_error_grid.py --out "$OUT" --skip-calibration --set 5 \
        --budget-s 200
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

TRAIN, INFER = "train", "infer"
T = dict  # a configuration's PlanSettings keywords

# (preset, settings, image size or None, held out). Ordered by size so a timeout loses the largest; every third
# row, spread over kinds, is held out of every fit.
CONFIGS: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=32), None, False),
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=256), None, True),
    ("seed-cnn", T(task=TRAIN, recipe="amp-bf16", batch=64), None, False),
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=1024), None, False),
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=64), 128, True),
    ("gpt2", T(task=TRAIN, recipe="fp32", batch=1, seq=128), None, False),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=2, seq=256), None, False),
    ("gpt2", T(task=INFER, batch=8, prompt=256, new_tokens=64), None, True),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=64, seq=128), None, False),
    ("gpt2", T(task=TRAIN, recipe="bf16", batch=8, seq=1024), None, False),
    ("gpt2", T(task=TRAIN, recipe="fp32", batch=4, seq=1024, checkpointing=True), None, True),
    ("resnet50", T(task=TRAIN, recipe="fp32", batch=32), None, False),
    ("resnet50", T(task=TRAIN, recipe="amp-bf16", batch=64), 160, False),
    ("resnet50", T(task=TRAIN, recipe="amp-bf16", batch=64), None, True),
    ("resnet50", T(task=TRAIN, recipe="bf16", batch=128), None, False),
    ("gpt2-medium", T(task=TRAIN, recipe="fp32", batch=8, seq=1024), None, False),
    (
        "gpt2-medium",
        T(task=TRAIN, recipe="amp-bf16", batch=4, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("gpt2-medium", T(task=TRAIN, recipe="bf16", batch=16, seq=512), None, False),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=8, seq=512, checkpointing=True), None, False),
    (
        "qwen2-0.5b",
        T(task=TRAIN, recipe="bf16", batch=8, seq=512, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("qwen2-0.5b", T(task=TRAIN, recipe="amp-bf16", batch=4, seq=1024), None, False),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=1, seq=128, checkpointing=True), None, False),
    ("qwen2-0.5b", T(task=INFER, batch=2, prompt=512, new_tokens=32), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="fp32", batch=2, seq=1024), None, False),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=2, seq=4096, checkpointing=True), None, False),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=4, seq=1024), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="fp32", batch=2, seq=512), None, False),
    ("tinyllama-1.1b", T(task=INFER, batch=1, prompt=512, new_tokens=32), None, False),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=8, seq=2048), None, True),
    ("tinyllama-1.1b", T(task=INFER, batch=16, prompt=1024, new_tokens=32), None, False),
    (
        "tinyllama-1.1b",
        T(task=TRAIN, recipe="amp-bf16", batch=1, seq=4096, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        False,
    ),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=16, seq=2048, checkpointing=True), None, True),
    ("llama-2-7b", T(task=INFER, batch=1, prompt=512, new_tokens=32), None, False),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=1, seq=1024, checkpointing=True), None, False),
    ("llama-2-7b", T(task=INFER, batch=8, prompt=2048, new_tokens=32), None, True),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=2, seq=512), None, False),
    (
        "llama-2-7b",
        T(task=TRAIN, recipe="bf16", batch=4, seq=2048, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        False,
    ),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=8, seq=2048, checkpointing=True), None, True),
]

# Held out, and measured by no run before 2026-12-03: a fresh test of the shipped model then
# (benchmarks/plan-error_h200_2026-12-03-fresh.md). The older rows above had all been looked at while the model was
# changed, so they no longer were one; a model changed while looking at these will need new rows in turn.
# ``--only-new`` measures these alone (75 s on an H200), each with the committed model's prediction written first.
NEW_HELD_OUT: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="amp-bf16", batch=512), None, True),
    ("resnet50", T(task=TRAIN, recipe="bf16", batch=32), None, True),
    ("resnet50", T(task=TRAIN, recipe="fp32", batch=64), 192, True),
    ("gpt2", T(task=TRAIN, recipe="bf16", batch=16, seq=512), None, True),
    (
        "gpt2",
        T(task=TRAIN, recipe="amp-bf16", batch=4, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("gpt2-medium", T(task=TRAIN, recipe="amp-bf16", batch=2, seq=512), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="bf16", batch=8, seq=1024, checkpointing=True), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="amp-bf16", batch=16, seq=256), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=4, seq=2048), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=8, seq=512), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=4, seq=4096, checkpointing=True), None, True),
    ("gpt2-medium", T(task=INFER, batch=4, prompt=512, new_tokens=32), None, True),
    ("qwen2-0.5b", T(task=INFER, batch=8, prompt=256, new_tokens=32), None, True),
]
# Held out and never measured before 2026-12-04, chosen (and committed) before the time model was changed after the
# kernel-class profile of benchmarks/plan-kernel-mix_h200_2026-12-04.md: the test of that change. ``--only-new-2``.
NEW_HELD_OUT_2: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=128), None, True),
    ("resnet50", T(task=TRAIN, recipe="amp-bf16", batch=96), None, True),
    ("resnet50", T(task=TRAIN, recipe="fp32", batch=128), 128, True),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=32, seq=256), None, True),
    ("gpt2", T(task=TRAIN, recipe="bf16", batch=32, seq=512), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="fp32", batch=4, seq=512), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="bf16", batch=4, seq=1024, checkpointing=True), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="amp-bf16", batch=8, seq=512), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=2, seq=1024), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="fp32", batch=1, seq=2048, checkpointing=True), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=2, seq=2048), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=16, seq=256), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="fp32", batch=1, seq=1024), None, True),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=1, seq=2048, checkpointing=True), None, True),
    ("tinyllama-1.1b", T(task=INFER, batch=4, prompt=512, new_tokens=32), None, True),
    ("gpt2", T(task=INFER, batch=16, prompt=128, new_tokens=64), None, True),
]
# Held out and never measured before the 2026-12-04 model was fixed (after NEW_HELD_OUT_2 had been looked at to
# find where it still missed): the clean test of that model. ``--only-new-3``.
NEW_HELD_OUT_3: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="amp-bf16", batch=256), None, True),
    ("resnet50", T(task=TRAIN, recipe="amp-bf16", batch=32), 128, True),
    ("resnet50", T(task=TRAIN, recipe="bf16", batch=64), 192, True),
    ("gpt2", T(task=TRAIN, recipe="fp32", batch=8, seq=512), None, True),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=8, seq=1024, checkpointing=True), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="amp-bf16", batch=8, seq=256), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="bf16", batch=2, seq=1024), None, True),
    (
        "qwen2-0.5b",
        T(task=TRAIN, recipe="amp-bf16", batch=2, seq=2048, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=16, seq=128), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="fp32", batch=4, seq=256), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=2, seq=2048), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=32, seq=256, checkpointing=True), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=1, seq=4096), None, True),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=2, seq=1024, checkpointing=True), None, True),
    ("qwen2-0.5b", T(task=INFER, batch=16, prompt=128, new_tokens=64), None, True),
    ("llama-2-7b", T(task=INFER, batch=2, prompt=1024, new_tokens=32), None, True),
]
# Held out and never measured, chosen and committed on 2026-12-05 with no device at hand, before any of them ran: the
# clean test of whatever the time model is when they are first measured (that day's change was `plan --calibrate`'s
# generate() host line), with more generate() rows (5) than the earlier sets (2). ``--only-new-4``.
NEW_HELD_OUT_4: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="bf16", batch=64), None, True),
    ("resnet50", T(task=TRAIN, recipe="fp32", batch=16), None, True),
    ("resnet50", T(task=TRAIN, recipe="amp-bf16", batch=128), 160, True),
    ("gpt2", T(task=TRAIN, recipe="bf16", batch=4, seq=256), None, True),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=16, seq=1024, checkpointing=True), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="amp-bf16", batch=16, seq=512), None, True),
    (
        "gpt2-medium",
        T(task=TRAIN, recipe="fp32", batch=2, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("qwen2-0.5b", T(task=TRAIN, recipe="amp-bf16", batch=32, seq=256), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=1, seq=4096), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=8, seq=512, checkpointing=True), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=1, seq=2048), None, True),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=4, seq=1024, checkpointing=True), None, True),
    ("gpt2", T(task=INFER, batch=1, prompt=512, new_tokens=64), None, True),
    ("gpt2-medium", T(task=INFER, batch=16, prompt=256, new_tokens=32), None, True),
    ("qwen2-0.5b", T(task=INFER, batch=1, prompt=2048, new_tokens=32), None, True),
    ("tinyllama-1.1b", T(task=INFER, batch=8, prompt=2048, new_tokens=32), None, True),
    ("llama-2-7b", T(task=INFER, batch=4, prompt=512, new_tokens=64), None, True),
]
# Held out and never measured, chosen and committed on 2026-12-05 before any of them ran and before the training host
# line's new calibration (1, 4 and 8 layers in interleaved rounds) was first measured on a GPU: its clean test.
# ``--set 5``.
NEW_HELD_OUT_5: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=512), None, True),
    ("resnet50", T(task=TRAIN, recipe="bf16", batch=16), None, True),
    ("resnet50", T(task=TRAIN, recipe="fp32", batch=48), 160, True),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=4, seq=512), None, True),
    ("gpt2", T(task=TRAIN, recipe="fp32", batch=16, seq=256, checkpointing=True), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="bf16", batch=32, seq=256), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="amp-bf16", batch=2, seq=1024), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="amp-bf16", batch=4, seq=512, checkpointing=True), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=8, seq=1024), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=4, seq=512), None, True),
    (
        "tinyllama-1.1b",
        T(task=TRAIN, recipe="bf16", batch=4, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=1, seq=1024), None, True),
    ("gpt2", T(task=INFER, batch=8, prompt=384, new_tokens=64), None, True),
    ("gpt2-medium", T(task=INFER, batch=1, prompt=128, new_tokens=64), None, True),
    ("qwen2-0.5b", T(task=INFER, batch=4, prompt=1024, new_tokens=32), None, True),
    ("tinyllama-1.1b", T(task=INFER, batch=1, prompt=512, new_tokens=64), None, True),
]
# Held out and never measured, chosen and committed on 2026-12-05 (the second session) before any of them ran, before
# the new training host line first ran on an H200 and before ``plan --probe-host`` first ran on a GPU: the clean
# test of both. ``--set 6``. Its eighth row was GPT-2-medium at 4096 tokens, past the model's 1024 learned
# positions: its first run failed there (an index out of range on the GPU, which lost the rest of that call). It
# became 1024 tokens after the first seven rows' results had been read (that row had not run), and ``plan`` now
# refuses a sequence past a model's positions.
NEW_HELD_OUT_6: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="fp32", batch=16), None, True),
    ("seed-cnn", T(task=TRAIN, recipe="amp-bf16", batch=1024), None, True),
    ("resnet50", T(task=TRAIN, recipe="amp-bf16", batch=48), None, True),
    ("resnet50", T(task=TRAIN, recipe="bf16", batch=256), 128, True),
    ("gpt2", T(task=TRAIN, recipe="fp32", batch=2, seq=1024), None, True),
    ("gpt2", T(task=TRAIN, recipe="bf16", batch=64, seq=256, checkpointing=True), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="amp-bf16", batch=4, seq=256), None, True),
    (
        "gpt2-medium",
        T(task=TRAIN, recipe="bf16", batch=1, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("qwen2-0.5b", T(task=TRAIN, recipe="fp32", batch=8, seq=128), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="amp-bf16", batch=1, seq=1024, checkpointing=True), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=16, seq=512), None, True),
    (
        "tinyllama-1.1b",
        T(task=TRAIN, recipe="amp-bf16", batch=2, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("llama-2-7b", T(task=TRAIN, recipe="bf16", batch=1, seq=512), None, True),
    ("gpt2", T(task=INFER, batch=32, prompt=128, new_tokens=32), None, True),
    ("qwen2-0.5b", T(task=INFER, batch=4, prompt=1024, new_tokens=64), None, True),
    ("tinyllama-1.1b", T(task=INFER, batch=2, prompt=256, new_tokens=64), None, True),
    ("llama-2-7b", T(task=INFER, batch=1, prompt=2048, new_tokens=32), None, True),
]
# Held out and never measured, chosen and committed on 2026-12-05 (the second session, after set 6 had run on three
# H100 hosts) for the first H200 run of ``plan --probe-host`` and of the one-workspace generate() memory: their
# clean test there. ``--set 7``.
NEW_HELD_OUT_7: list[tuple[str, dict[str, Any], int | None, bool]] = [
    ("seed-cnn", T(task=TRAIN, recipe="bf16", batch=128), None, True),
    ("resnet50", T(task=TRAIN, recipe="fp32", batch=96), 160, True),
    ("gpt2", T(task=TRAIN, recipe="amp-bf16", batch=16, seq=512), None, True),
    (
        "gpt2",
        T(task=TRAIN, recipe="bf16", batch=2, seq=1024, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("gpt2-medium", T(task=TRAIN, recipe="fp32", batch=4, seq=1024), None, True),
    ("gpt2-medium", T(task=TRAIN, recipe="amp-bf16", batch=16, seq=256, checkpointing=True), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="bf16", batch=32, seq=256), None, True),
    ("qwen2-0.5b", T(task=TRAIN, recipe="fp32", batch=2, seq=2048, checkpointing=True), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="amp-bf16", batch=8, seq=256), None, True),
    ("tinyllama-1.1b", T(task=TRAIN, recipe="bf16", batch=4, seq=2048, checkpointing=True), None, True),
    (
        "llama-2-7b",
        T(task=TRAIN, recipe="bf16", batch=1, seq=2048, checkpointing=True, checkpoint_variant="reentrant"),
        None,
        True,
    ),
    ("gpt2", T(task=INFER, batch=4, prompt=256, new_tokens=128), None, True),
    ("gpt2-medium", T(task=INFER, batch=8, prompt=256, new_tokens=32), None, True),
    ("tinyllama-1.1b", T(task=INFER, batch=4, prompt=1024, new_tokens=32), None, True),
]
# --set N measures one set alone: 0 the fit grid, 1 … 7 the held-out sets in the order they were chosen
SETS = [
    CONFIGS,
    NEW_HELD_OUT,
    NEW_HELD_OUT_2,
    NEW_HELD_OUT_3,
    NEW_HELD_OUT_4,
    NEW_HELD_OUT_5,
    NEW_HELD_OUT_6,
    NEW_HELD_OUT_7,
]
ALL = [row for rows in SETS for row in rows]


def label(name: str, kw: dict[str, Any], image: int | None) -> str:
    if kw["task"] == INFER:
        return f"{name} infer bf16 b{kw['batch']} p{kw['prompt']}+{kw['new_tokens']}"
    seq = "" if name in ("resnet50", "seed-cnn") else f" s{kw['seq']}"
    ck = f" ckpt-{kw.get('checkpoint_variant', 'non-reentrant')}" if kw.get("checkpointing") else ""
    return f"{name} {kw['recipe']} b{kw['batch']}{seq}{ck}" + (f" @{image}px" if image else "")


def model_for(name: str, image: int | None) -> Any:
    from gpukit.plan.models import load_model

    spec = load_model(name)
    if image:
        from gpukit.plan.cnn_count import at_image_size

        spec = at_image_size(spec, image)
    return spec


def _meta(torch: Any, argv: list[str]) -> dict[str, Any]:
    meta = {"device": torch.cuda.get_device_name(), "python": platform.python_version(), "torch": torch.__version__,
            "command": "PYTHONPATH=src python3 benchmarks/scripts/plan_error_grid.py " + " ".join(argv),
            "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}  # fmt: skip
    for lib in ("transformers", "torchvision"):
        try:
            meta[lib] = __import__(lib).__version__
        except ImportError:
            meta[lib] = "absent"
    meta["hf_default_checkpointing"] = _hf_default_checkpointing()
    return meta


def _hf_default_checkpointing() -> str:
    """What a bare ``gradient_checkpointing_enable()`` passes to torch.utils.checkpoint in this transformers."""
    try:
        import transformers

        cfg = transformers.AutoConfig.for_model("llama", vocab_size=64, hidden_size=16, num_hidden_layers=1,
                                                num_attention_heads=2, intermediate_size=32)  # fmt: skip
        model = transformers.AutoModelForCausalLM.from_config(cfg)
        model.gradient_checkpointing_enable()
        fn = model.model.layers[0]._gradient_checkpointing_func
        return f"use_reentrant={getattr(fn, 'keywords', {}).get('use_reentrant', 'torch default')}"
    except Exception as exc:  # a record, not a requirement
        return f"unknown ({type(exc).__name__})"


def predict(name: str, kw: dict[str, Any], image: int | None) -> dict[str, Any]:
    """The committed model's prediction with the shipped calibration, made before the row is measured."""
    from gpukit.hardware.specs import get_spec
    from gpukit.plan.calibration import find_calibration
    from gpukit.plan.compute import estimate_time
    from gpukit.plan.memory import PlanSettings, estimate_memory

    model, s, spec = model_for(name, image), PlanSettings(**kw), get_spec("h200-sxm")
    mem = estimate_memory(model, s)
    est = estimate_time(model, s, mem, spec, calibration=find_calibration(spec))
    return {"peak_allocated_bytes": mem.peak_allocated_bytes, "calibration": est.ceilings_source,
            "time_s": est.step_s if s.task == TRAIN else est.total_s,
            "phase_s": {p["name"]: p["total_s"] for p in est.phases}}  # fmt: skip


def _probe(row: dict[str, Any], when: str, name: str, kw: dict[str, Any], image: int | None,
           head_dim: int | None = None) -> None:  # fmt: skip
    """``plan --probe-host``'s host floor of the row's configuration (plan/probe.py), timed ``when`` it is measured
    (``head_dim``: the shrunk model's, where not the model's own)."""
    import torch

    from gpukit.plan.memory import PlanSettings
    from gpukit.plan.probe import probe_host

    t0 = time.perf_counter()
    try:
        got: dict[str, Any] = dict(probe_host(model_for(name, image), PlanSettings(**kw), head_dim=head_dim))
    except Exception as exc:  # the probe is a second prediction; its failure must not lose the measurement
        got = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    got["wall_s"] = time.perf_counter() - t0
    row.setdefault("host_probe", {})[when] = got
    gc.collect()
    torch.cuda.empty_cache()


def measure_row(i: int, out: Path, probe: bool = False) -> dict[str, Any]:
    import torch

    from gpukit.plan.measure import measure
    from gpukit.plan.memory import PlanSettings

    name, kw, image, held = ALL[i]
    row: dict[str, Any] = {"i": i, "config": label(name, kw, image), "model": name, "image_size": image,
                           "settings": kw, "held_out": held, "predicted_before": predict(name, kw, image)}  # fmt: skip
    if probe:
        _probe(row, "before", name, kw, image)
        if name not in ("seed-cnn", "resnet50"):
            _probe(row, "narrow", name, kw, image, head_dim=16)  # 2026-12-05's first probes: 16 for every model
    t0 = time.perf_counter()
    try:
        m = measure(model_for(name, image), PlanSettings(**kw))
        row["measured"] = m.to_dict()
    except Exception as exc:  # one failing configuration must not lose the others
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        row["trace"] = traceback.format_exc()[-2000:]
    row["wall_s"] = time.perf_counter() - t0
    gc.collect()
    torch.cuda.empty_cache()
    if probe:
        _probe(row, "after", name, kw, image)
    with (out / "rows.jsonl").open("a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=270.0, help="start no configuration after this many seconds")
    ap.add_argument("--skip-calibration", action="store_true")
    ap.add_argument("--probe", action="store_true", help="time each configuration's host floor with plan "
                    "--probe-host's probe just before and just after measuring it (a few seconds each)")  # fmt: skip
    ap.add_argument("--first", type=int, default=0, help="start at this configuration (0-based, within --set "
                    "when given; the ones before were measured in an earlier call)")  # fmt: skip
    ap.add_argument("--set", type=int, choices=range(len(SETS)), help="measure one set alone: 0 the grid, N "
                    "the held-out set NEW_HELD_OUT_N (1 the first), never measured before it was chosen")  # fmt: skip
    for n in range(1, 5):  # the flags earlier runs' commands name
        ap.add_argument(f"--only-new{'' if n == 1 else f'-{n}'}", dest="set", action="store_const", const=n,
                        help=argparse.SUPPRESS)  # fmt: skip
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    import torch

    if not torch.cuda.is_available():
        print("error: plan_error_grid needs a CUDA GPU", file=sys.stderr)
        return 1
    (args.out / "meta.json").write_text(json.dumps(_meta(torch, sys.argv[1:]), indent=1))
    if not args.skip_calibration:
        from gpukit.plan.calibrate import run_calibration
        from gpukit.plan.calibration import save_calibration

        def say(msg: str) -> None:
            print(f"[{time.perf_counter() - t0:6.1f}s] calibrate: {msg}", flush=True)

        try:
            save_calibration(run_calibration("cuda", progress=say), args.out / "calibration.json")
            say("written")
        except Exception:  # the configurations are still worth measuring
            say("FAILED\n" + traceback.format_exc())
    if args.set is None:
        todo = list(range(args.first, len(CONFIGS) + len(NEW_HELD_OUT)))  # the grid and the first held-out set
    else:
        start = sum(len(rows) for rows in SETS[: args.set])
        todo = list(range(start + args.first, start + len(SETS[args.set])))
    for n, i in enumerate(todo):
        if time.perf_counter() - t0 > args.budget_s:
            print(f"budget of {args.budget_s:.0f} s spent: {len(todo) - n} configurations not started", flush=True)
            break
        row = measure_row(i, args.out, args.probe)
        m = row.get("measured") or {}
        what = row.get("error") or f"alloc {m.get('peak_allocated_bytes', 0) / 2**30:.2f} GiB, " + (
            f"step {m['step_s'] * 1e3:.1f} ms" if m.get("step_s") else f"generate {m.get('generate_s', 0):.3f} s"
        )
        print(f"[{time.perf_counter() - t0:6.1f}s] {row['config']}: {what} ({row['wall_s']:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
