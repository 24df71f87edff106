"""DDP scaling of `gpukit train`: ResNet-18, one GPU vs `torchrun --nproc_per_node=2`, on the same data.

    NCCL_NVLS_ENABLE=0 PYTHONPATH=src python3 benchmarks/scripts/train_ddp.py --out "$OUT"

Generates 40,960 224×224 JPEGs (two learnable classes), then runs the same command twice:
    python -m gpukit train DATA --model resnet18 --image-size 224 --batch-size 512 --epochs 6 --no-cuda-graphs …
once as one process and once under `torchrun --standalone --nproc_per_node=2` (batch 512 per GPU, so the global
batch doubles: weak scaling, the usual way to read DDP throughput). Both runs use the eager step (DDP does not use
the CUDA graph), so the ratio compares like with like. 224×224 keeps each epoch long enough (about 80 steps on one
GPU) for the per-epoch timing to be stable. images/s: median of epochs 2…6, summed over ranks.
Writes train_ddp_<gpu>_<date>.json and .md into --out; exit 1 when the ratio is under 1.8.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
sys.path.insert(0, str(HERE))

from train_throughput import generate  # noqa: E402


def run(cmd: list[str], env: dict[str, str]) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    doc = json.loads(proc.stdout[proc.stdout.index("{") :])
    rates = [e["images_per_s"] for e in doc["epochs"]]
    return {
        "images_per_s": statistics.median(rates[1:]),
        "per_epoch": rates,
        "wall_s": time.perf_counter() - t0,
        "world_size": doc["world_size"],
        "final_train_accuracy": doc["epochs"][-1]["train_accuracy"],
        "gpu_util_pct": [e["gpu_util_pct"] for e in doc["epochs"]],
        "notes": doc["notes"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "benchmarks/out")))
    ap.add_argument("--images", type=int, default=40_960)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--model", default="resnet18")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="gpukit-ddp-bench-"))
    gen_s = generate(tmp / "data", args.images, args.image_size)
    print(f"generated {args.images} JPEGs in {gen_s:.1f} s", flush=True)
    env = {**os.environ, "PYTHONPATH": str(SRC), "NCCL_NVLS_ENABLE": "0", "OMP_NUM_THREADS": "4"}
    common = [
        "-m",
        "gpukit",
        "train",
        str(tmp / "data"),
        "--model",
        args.model,
        "--image-size",
        str(args.image_size),
        "--batch-size",
        str(args.batch_size),
        "--epochs",
        str(args.epochs),
        "--val-fraction",
        "0",
        "--device",
        "cuda",
        "--no-cuda-graphs",
        "--json",
    ]
    one = run([sys.executable, *common, "--out", str(tmp / "one")], env)
    print(f"1 GPU: {one['images_per_s']:,.0f} img/s", flush=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    two = run([*torchrun, *common, "--out", str(tmp / "two")], env)
    ratio = two["images_per_s"] / one["images_per_s"]
    print(f"2 GPUs (DDP): {two['images_per_s']:,.0f} img/s = {ratio:.2f}× one GPU", flush=True)
    import torch

    doc = {
        "what": f"DDP scaling, {args.model}, {args.image_size}px, batch {args.batch_size} per GPU",
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "command": " ".join(sys.argv),
        "one_gpu": one,
        "two_gpus": two,
        "ratio": ratio,
        "check_ratio_ge_1_8": ratio >= 1.8,
        "date": time.strftime("%Y-%m-%d"),
    }
    (args.out / f"train_ddp_{_slug(doc)}.json").write_text(json.dumps(doc, indent=2))
    md = (
        f"# DDP scaling of gpukit train — {doc['gpu']}, {doc['date']}\n\n{doc['what']}; torch {doc['torch']}.\n"
        f"Command: `{doc['command']}`\n\n| GPUs | img/s (median, epochs 2+) |\n| ---: | ---: |\n"
        f"| 1 | {one['images_per_s']:,.0f} |\n| 2 | {two['images_per_s']:,.0f} |\n\n"
        f"Ratio {ratio:.2f}× (check ≥ 1.8: {'PASS' if ratio >= 1.8 else 'FAIL'})\n"
    )
    (args.out / f"train_ddp_{_slug(doc)}.md").write_text(md)
    print(md)
    return 0 if ratio >= 1.8 else 1


def _slug(doc: dict) -> str:
    """File stem part per benchmarks/ naming: <what>_<hardware>_<yyyy-mm-dd>."""
    gpu = "-".join(doc["gpu"].lower().replace("nvidia", "nvidia ").split())
    return f"{gpu}_{doc['date']}"


if __name__ == "__main__":
    sys.exit(main())
