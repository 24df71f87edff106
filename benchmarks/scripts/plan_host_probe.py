"""Issue 25's decode host floor, probed: what one generated token costs the host per decoder layer, for tiny models
(64 wide, so the GPU or the CPU does almost no work; bf16 on CUDA, fp32 on a CPU) of 1 to 12 layers and for
real-width ones, at the batch and prompt sizes of the planner's error table, and, on CUDA, under each
scaled-dot-product attention backend.

    PYTHONPATH=src python3 benchmarks/scripts/plan_host_probe.py --device cpu --out probe_cpu.json
    PYTHONPATH=src python3 benchmarks/scripts/plan_host_probe.py --device cuda --out probe_cuda.json   # ~2 min, H200

The questions it answers (none of them is answered by the error table's rows alone):
1. Does the host's cost per layer and token depend on the batch and the prompt (the KV length)? The calibration
   measures it at batch 1, prompt 16 (``plan/calibrate.py``'s ``_host_decode``); the table's rows run 1-16 × 128-2048.
2. Does a tiny model's per-layer cost predict a real-width model's (``--device cuda``: GPT-2, GPT-2-medium,
   Qwen2-0.5B, TinyLlama at their real widths, random weights)?
3. Does the attention backend matter? ``sdpa_kernel`` forces each of flash, memory-efficient, cuDNN and math in
   turn (a backend that cannot run a shape is recorded as failed).
4. Does the same tiny model on the CPU cost the host what it costs on CUDA (``--device cpu`` on the GPU host beside
   the CUDA run)? If it does, a plan-time probe of seconds could stand in for the calibration's host line on any host.

Per token = (generate(n) − generate(1)) / (n − 1), each the median of 5 calls after a warm call, timed on the host
clock after a synchronisation (the GPU is idle at these sizes, so host time is the call's time).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

TINY_LAYERS = (1, 3, 6, 12)
SHAPES = ((1, 16), (4, 128), (8, 512))  # (batch, prompt): the calibration's, and two of the error table's
REAL = ("gpt2", "gpt2-medium", "qwen2-0.5b", "tinyllama-1.1b")
BACKENDS = ("default", "flash", "efficient", "cudnn", "math")
KW = {"do_sample": False, "use_cache": True, "pad_token_id": 0, "eos_token_id": None}


def tiny_model(torch: Any, family: str, layers: int, dev: str) -> Any:
    from gpukit.plan.calibrate import _tiny

    # bf16 as the table's rows on CUDA; fp32 on a CPU, where bf16 without native support adds conversion work
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    return _tiny(torch, family, layers, dtype, dev, "none", use_cache=True, positions=1024)


def real_model(torch: Any, preset: str, dev: str) -> Any:
    from gpukit.plan.measure import build_module
    from gpukit.plan.memory import PlanSettings
    from gpukit.plan.models import load_model

    return build_module(load_model(preset), PlanSettings(task="infer", dtype="bf16"), dev)


def per_token(torch: Any, model: Any, batch: int, prompt: int, dev: str, n: int = 17) -> dict[str, float]:
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (batch, prompt), device=dev)

    def call(tokens: int) -> float:
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **KW)
        if dev == "cuda":
            torch.cuda.synchronize()  # the call's last kernels, before reading the clock
        return time.perf_counter() - t0

    with torch.inference_mode():
        call(n), call(1)  # warm: kernel plans, the allocator
        many = statistics.median(call(n) for _ in range(5))
        one = statistics.median(call(1) for _ in range(5))
    return {"token_s": (many - one) / (n - 1), "prefill_s": one}


def backend(torch: Any, name: str) -> Any:
    if name == "default":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(
        {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
         "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[name]
    )  # fmt: skip


def probe_tiny(torch: Any, dev: str) -> list[dict[str, Any]]:
    rows = []
    for family in ("gpt2", "llama", "qwen2"):
        for layers in TINY_LAYERS:
            model = tiny_model(torch, family, layers, dev).eval()
            for batch, prompt in SHAPES:
                t = per_token(torch, model, batch, prompt, dev)
                rows.append({"family": family, "layers": layers, "batch": batch, "prompt": prompt, **t})
                print(f"tiny {family} L{layers} b{batch} p{prompt}: {t['token_s'] * 1e3:.2f} ms/token", flush=True)
            del model
    return rows


def probe_real(torch: Any, dev: str) -> list[dict[str, Any]]:
    rows = []
    for preset in REAL:
        model = real_model(torch, preset, dev).eval()
        for name in BACKENDS:
            row: dict[str, Any] = {"preset": preset, "backend": name, "batch": 4, "prompt": 256}
            try:
                with backend(torch, name):
                    row.update(per_token(torch, model, 4, 256, dev))
            except Exception as exc:  # a backend that cannot run this shape: recorded, the others go on
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            rows.append(row)
            print(f"real {preset} {name}: {row.get('token_s', float('nan')) * 1e3:.2f} ms/token", flush=True)
        del model
        torch.cuda.empty_cache()
    return rows


def lines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per family and shape: the per-layer slope between 1 and 12 layers, and between 3 and 6."""
    out = []
    for family in sorted({r["family"] for r in rows}):
        for batch, prompt in SHAPES:
            key = (family, batch, prompt)
            t = {r["layers"]: r["token_s"] for r in rows if (r["family"], r["batch"], r["prompt"]) == key}
            if {1, 3, 6, 12} <= t.keys():
                out.append({"family": family, "batch": batch, "prompt": prompt,
                            "per_layer_s_1_12": (t[12] - t[1]) / 11, "per_layer_s_3_6": (t[6] - t[3]) / 3,
                            "fixed_s": t[1] - (t[12] - t[1]) / 11})  # fmt: skip
    return out


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch (--device cpu)")
    args = ap.parse_args()
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    meta = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
    }
    tiny = probe_tiny(torch, args.device)
    real = probe_real(torch, args.device) if args.device == "cuda" else []
    args.out.write_text(json.dumps({"meta": meta, "tiny": tiny, "lines": lines(tiny), "real": real}, indent=1))


if __name__ == "__main__":
    main()
