"""Seed-CNN training throughput on one GPU: plain, tuned, synthetic ceiling and gpukit, in one run.

    PYTHONPATH=src python3 benchmarks/scripts/train_throughput.py --out "$OUT"

1. Generates N (default 20,480) 64×64 JPEGs with a learnable difference (cats warmer, dogs cooler, plus a bright
   square on the left or right) in a temporary folder, with all CPU cores.
2. Trains the seed CNN (conv32-pool-dense128, Adam, BCE) with the seed's augmentation (rescale 1/255, shear 0.2°,
   zoom 0.2, horizontal flip) at batch 32 and 256, four ways:
   - plain:     torchvision ImageFolder + RandomAffine/RandomHorizontalFlip/ToTensor + a default DataLoader
   - tuned:     the same with 14 workers, pinned memory, persistent workers, prefetch 4
   - synthetic: random tensors already on the GPU, the same model and optimizer (no data work at all)
   - gpukit:    gpukit.train (decoded uint8 set on the GPU, augmentation on the GPU, bf16, CUDA graph)
   Every loop runs fp32 eager unless noted; images/s come from whole epochs, the first one left out (warm-up,
   worker start, cuDNN autotuning, graph capture), median over the epochs measured.
3. Prints a table with the ratios and writes train_throughput_<gpu>_<date>.json and .md into --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


# -- data ---------------------------------------------------------------------------------------------------------
def _make_images(job: tuple[str, int, int, int, int]) -> int:
    from PIL import Image

    root, label, start, count, size = job
    rng = np.random.default_rng(1000 * label + start)
    name = ("cat", "dog")[label]
    for i in range(start, start + count):
        pixels = rng.normal(120, 40, (size, size, 3))
        pixels[..., 0 if label == 0 else 2] += 40  # warmer vs cooler
        s = size // 4
        x = rng.integers(0, size // 2 - s) + (0 if label == 0 else size // 2)
        y = rng.integers(0, size - s)
        pixels[y : y + s, x : x + s] = 230  # a bright square, left for cats, right for dogs
        img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        img.save(os.path.join(root, name, f"{name}.{i:06d}.jpg"), quality=90)
    return count


def generate(root: Path, n: int, size: int = 64) -> float:
    """n JPEGs, half per class, into root/cat and root/dog; returns seconds taken."""
    t0 = time.perf_counter()
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True, exist_ok=True)
    per_class, chunk = n // 2, 256
    jobs = [
        (str(root), label, s, min(chunk, per_class - s), size) for label in (0, 1) for s in range(0, per_class, chunk)
    ]
    with Pool(os.cpu_count()) as pool:
        pool.map(_make_images, jobs)
    return time.perf_counter() - t0


# -- the reference loops ----------------------------------------------------------------------------------------
def _seed_aug():
    import torchvision.transforms as T

    # Keras shear_range=0.2 (degrees), zoom_range=0.2 → scale (0.8, 1.2), horizontal_flip, rescale 1/255
    return T.Compose([T.RandomAffine(degrees=0, shear=0.2, scale=(0.8, 1.2)), T.RandomHorizontalFlip(), T.ToTensor()])


def _step_fn(model, opt):
    import torch.nn.functional as F

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.binary_cross_entropy_with_logits(model(x).view(-1), y.float())
        loss.backward()
        opt.step()
        return loss

    return step


def _fresh(seed: int = 0):
    import torch

    from gpukit.train.models import seed_cnn

    torch.manual_seed(seed)
    model = seed_cnn().cuda()
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def loader_loop(root: Path, batch: int, epochs: int, tuned: bool) -> list[float]:
    """images/s per epoch for ImageFolder + DataLoader, plain or tuned."""
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    ds = ImageFolder(str(root), transform=_seed_aug())
    kw = dict(num_workers=14, pin_memory=True, persistent_workers=True, prefetch_factor=4) if tuned else {}
    dl = DataLoader(ds, batch_size=batch, shuffle=True, **kw)
    model, opt = _fresh()
    step = _step_fn(model, opt)
    rates = []
    for _ in range(epochs):
        t0, seen = time.perf_counter(), 0
        for x, y in dl:
            step(x.cuda(non_blocking=tuned), y.cuda(non_blocking=tuned))
            seen += x.shape[0]
        torch.cuda.synchronize()  # the epoch ends when the GPU has finished its last step
        rates.append(seen / (time.perf_counter() - t0))
    return rates


def synthetic_loop(n: int, batch: int, epochs: int) -> list[float]:
    """images/s per epoch with random tensors already on the GPU: the ceiling of the plain training step."""
    import torch

    model, opt = _fresh()
    step = _step_fn(model, opt)
    xs = torch.rand(8, batch, 3, 64, 64, device="cuda")  # rotate 8 batches: not one tensor hot in L2
    ys = torch.randint(0, 2, (8, batch), device="cuda")
    rates = []
    steps = n // batch
    for _ in range(epochs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(steps):
            step(xs[i % 8], ys[i % 8])
        torch.cuda.synchronize()
        rates.append(steps * batch / (time.perf_counter() - t0))
    return rates


def gpukit_loop(root: Path, batch: int, epochs: int, out: Path, **overrides) -> tuple[list[float], dict]:
    from gpukit.train.augment import RECIPES
    from gpukit.train.config import TrainConfig
    from gpukit.train.loop import train

    settings = dict(
        data=root,
        model="seed-cnn",
        epochs=epochs,
        batch_size=batch,
        image_size=64,
        device="cuda",
        val_fraction=0.0,
        out=out,
        seed=0,
        min_steps=0,  # the epochs asked for, as measured before the step budget existed
        augment=RECIPES["seed"],  # the seed's recipe (flip on), as measured before the default dropped the flip
    )
    cfg = TrainConfig(**{**settings, **overrides})  # type: ignore[arg-type]
    import torch

    flags = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        result = train(cfg)
    finally:  # gpukit turns on cuDNN autotuning and TF32; the reference loops keep torch's defaults
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    info = {
        "amp": result.amp,
        "cache": result.cache,
        "cuda_graphs": result.cuda_graphs,
        "decode_s": result.decode_s,
        "final_train_accuracy": result.epochs[-1].train_accuracy,
        "notes": result.notes,
        "gpu_util_pct": [None if e.gpu_util_pct is None else round(e.gpu_util_pct) for e in result.epochs],
        "data_wait_s": [e.data_wait_s for e in result.epochs],
    }
    return [e.images_per_s for e in result.epochs], info


def gpukit_summary(root: Path, batch: int, epochs: int, out: Path, **overrides) -> dict:
    rates, info = gpukit_loop(root, batch, epochs, out, **overrides)
    return {**summarise(rates), **info}


def measure(fn) -> dict:
    """Run one measurement; a failure is recorded (and shown) instead of ending the whole benchmark."""
    try:
        return fn()
    except Exception as exc:
        traceback.print_exc()
        return {"images_per_s": None, "error": f"{type(exc).__name__}: {exc}"}


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def num(value: float | None, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)


def summarise(rates: list[float]) -> dict:
    measured = rates[1:] if len(rates) > 1 else rates  # from the second epoch
    return {"images_per_s": statistics.median(measured), "min": min(measured), "max": max(measured), "per_epoch": rates}


# -- main ---------------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "benchmarks/out")))
    ap.add_argument("--images", type=int, default=20_480)
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 256])
    ap.add_argument("--data", type=Path, help="use this folder instead of generating one")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: this benchmark needs one", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="gpukit-train-bench-"))
    root = args.data or tmp / "data"
    gen_s = 0.0 if args.data else generate(root, args.images)
    n = sum(1 for _ in root.rglob("*.jpg"))
    print(f"{n} JPEGs in {root} (generated in {gen_s:.1f} s)", flush=True)
    results: dict = {}
    plan = {"plain": 2, "tuned": 4, "synthetic": 4, "gpukit": 6}  # epochs per loop (the first is not measured)
    for batch in args.batches:
        t = time.perf_counter()
        row: dict = {
            "plain": measure(lambda b=batch: summarise(loader_loop(root, b, plan["plain"], tuned=False))),
            "tuned": measure(lambda b=batch: summarise(loader_loop(root, b, plan["tuned"], tuned=True))),
            "synthetic": measure(lambda b=batch: summarise(synthetic_loop(n, b, plan["synthetic"]))),
            "gpukit": measure(lambda b=batch: gpukit_summary(root, b, plan["gpukit"], tmp / f"run-{b}")),
        }
        g = row["gpukit"]["images_per_s"]
        row["gpukit_over_tuned"] = ratio(g, row["tuned"]["images_per_s"])
        row["gpukit_over_synthetic"] = ratio(g, row["synthetic"]["images_per_s"])
        results[str(batch)] = row
        print(
            f"batch {batch}: "
            + ", ".join(f"{k} {num(row[k]['images_per_s'])}" for k in plan)
            + f" img/s; gpukit/tuned {num(row['gpukit_over_tuned'], '.2f')}×, gpukit/synthetic "
            f"{num(row['gpukit_over_synthetic'], '.2f')} ({time.perf_counter() - t:.0f} s)",
            flush=True,
        )
    # correctness gates performance: gpukit's figure counts only if that run learned the (easy) task
    checks = {
        f"batch{b}_gpukit_learned": (r["gpukit"].get("final_train_accuracy") or 0) >= 0.9 for b, r in results.items()
    }
    if "256" in results:
        r = results["256"]
        checks["batch256_gpukit_ge_4x_tuned"] = (r["gpukit_over_tuned"] or 0) >= 4
        checks["batch256_gpukit_ge_50pct_synthetic"] = (r["gpukit_over_synthetic"] or 0) >= 0.5
    if "32" in results:
        checks["batch32_gpukit_ge_90pct_synthetic"] = (results["32"]["gpukit_over_synthetic"] or 0) >= 0.9
    doc = {
        "what": "seed-CNN training throughput, 64x64 JPEGs, seed augmentation",
        "images": n,
        "gpu": torch.cuda.get_device_name(0),
        "cpu_cores": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "command": " ".join(sys.argv),
        "epochs": plan,
        "results": results,
        "checks": checks,
        "date": time.strftime("%Y-%m-%d"),
    }
    (args.out / f"train_throughput_{_slug(doc)}.json").write_text(json.dumps(doc, indent=2))
    (args.out / f"train_throughput_{_slug(doc)}.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0 if all(checks.values()) else 1


def markdown(doc: dict) -> str:
    lines = [
        f"# Seed-CNN training throughput — {doc['gpu']}, {doc['cpu_cores']} CPU cores, {doc['date']}",
        "",
        f"{doc['images']} JPEGs 64×64, seed augmentation; torch {doc['torch']}, Python {doc['python']}.",
        f"Command: `{doc['command']}`. images/s: median of whole epochs from the second on.",
        "",
        "| batch | plain | tuned | synthetic | gpukit | gpukit / tuned | gpukit / synthetic |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for batch, r in doc["results"].items():
        lines.append(
            f"| {batch} | "
            + " | ".join(num(r[k]["images_per_s"]) for k in ("plain", "tuned", "synthetic", "gpukit"))
            + f" | {num(r['gpukit_over_tuned'], '.2f')}× | {num(r['gpukit_over_synthetic'], '.0%')} |"
        )
    lines.append("")
    for b, r in doc["results"].items():
        g = r["gpukit"]
        if "amp" in g:
            lines.append(
                f"gpukit at batch {b}: amp {g['amp']}, cache {g['cache']}, CUDA graphs {g['cuda_graphs']}, decode "
                f"{g['decode_s']:.1f} s, final train accuracy {g['final_train_accuracy']:.3f}, GPU utilisation "
                f"{g['gpu_util_pct']}; notes: {g['notes'] or 'none'}"
            )
        errors = {k: r[k]["error"] for k in ("plain", "tuned", "synthetic", "gpukit") if "error" in r[k]}
        if errors:
            lines.append(f"errors at batch {b}: {errors}")
    lines += [
        "",
        "Checks: " + ", ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in doc["checks"].items()),
        "",
    ]
    return "\n".join(lines)


def _slug(doc: dict) -> str:
    """File stem part per benchmarks/ naming: <what>_<hardware>_<yyyy-mm-dd>."""
    gpu = "-".join(doc["gpu"].lower().replace("nvidia", "nvidia ").split())
    return f"{gpu}_{doc['date']}"


if __name__ == "__main__":
    sys.exit(main())
