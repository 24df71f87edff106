"""Issue 25's training host floor, probed: does the calibration's tiny (64-wide) model price a real-width model's host
time per layer, and how far does the calibrated line move between two runs on one host?

    PYTHONPATH=src python3 benchmarks/scripts/plan_host_train_probe.py --out probe_train.json   # ~3 min, one GPU

1. For each family (GPT-2, Llama, Qwen2) at 64 wide and at the widths of the error table's models (head dim 64,
   their MLP ratios), precision mode (fp32, amp, bf16), no checkpointing: one training step (batch 1, 16 tokens, so
   the GPU idles and the time is the host's) of 1, 4 and 8 layers in interleaved rounds, and the line through the
   per-depth medians: ``plan/calibrate.py``'s ``_host_train`` way, on wider models.
2. ``_host_train`` itself ``--repeats`` times in a row: the spread of each line between runs on one host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import time
from pathlib import Path
from typing import Any

from gpukit.plan import calibrate

WIDTHS = {"gpt2": (64, 768, 1024), "llama": (64, 2048, 4096), "qwen2": (64, 896)}
MLP = {2048: 5632, 4096: 11008, 896: 4864}  # intermediate sizes of TinyLlama, Llama-2-7B, Qwen2-0.5B
KV = {2048: 4, 4096: 32, 896: 2}


def wide(torch: Any, family: str, width: int, layers: int, dtype: Any) -> Any:
    import transformers

    cfg: dict[str, Any] = dict(calibrate.TINY[family])
    kind = str(cfg.pop("model_type"))
    if width != 64:
        heads = width // 64
        if kind == "gpt2":
            cfg.update(n_embd=width, n_head=heads)
        else:
            cfg.update(hidden_size=width, num_attention_heads=heads, num_key_value_heads=KV[width],
                       intermediate_size=MLP[width])  # fmt: skip
    cfg["n_layer" if kind == "gpt2" else "num_hidden_layers"] = layers
    config = transformers.AutoConfig.for_model(kind, **cfg)
    config.use_cache = False
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.to("cuda").train()


def line(torch: Any, tm: Any, family: str, width: int, mode: str, rounds: int = 5, warm: int = 2) -> dict[str, Any]:
    dtype = torch.bfloat16 if mode == "bf16" else torch.float32
    models = {n: wide(torch, family, width, n, dtype) for n in calibrate.TRAIN_DEPTHS}
    ids = torch.randint(0, 256, (1, 16), device="cuda")
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if mode == "amp" else contextlib.nullcontext()
    med = calibrate._depth_medians(tm, models, ids, amp, rounds, warm)
    out = calibrate._phase_lines(med)
    del models
    torch.cuda.empty_cache()
    return {"family": family, "width": width, "mode": mode, "per_depth_s": {n: list(m) for n, m in med.items()}, **out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch
    import transformers

    tm = calibrate._Timer(torch, "cuda")
    doc: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "transformers": transformers.__version__, "cpu": platform.processor() or platform.machine(),
                           "widths": [], "repeats": []}  # fmt: skip
    t0 = time.perf_counter()
    for family, widths in WIDTHS.items():
        for mode in calibrate.MODES:
            for width in widths:
                row = line(torch, tm, family, width, mode)
                doc["widths"].append(row)
                f, b = row["forward"], row["backward"]
                print(f"[{time.perf_counter() - t0:5.0f}s] {family:6s} {mode:5s} {width:5d} wide: ms a layer "
                      f"forward {f[1] * 1e3:.2f} (+{f[0] * 1e3:.2f}), backward {b[1] * 1e3:.2f} (+{b[0] * 1e3:.2f})",
                      flush=True)  # fmt: skip
                args.out.write_text(json.dumps(doc, indent=1))
    for k in range(args.repeats):
        doc["repeats"].append(calibrate._host_train(torch, tm, "cuda", quick=False))
        print(f"[{time.perf_counter() - t0:5.0f}s] _host_train run {k + 1}", flush=True)
        args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
