"""Seed-CNN training throughput on one GPU with each augmentation recipe, against the 2026-12-01 figures.

    PYTHONPATH=src python3 benchmarks/scripts/train_throughput_aug.py --out "$OUT"

gpukit's loop exactly as ``train_throughput.py`` measures it (20,480 generated 64×64 JPEGs, the seed CNN, 6 epochs,
the first left out, median of whole epochs, bf16, GPU cache, CUDA graph) at batch 32 and 256, with the recipes
``none`` (augmentation off: no warp, no jitter), ``seed`` (the article's shear/zoom/flip, as measured before) and
``default`` (random crop, shift and colour jitter). The figures of 2026-12-01 (``benchmarks/train_h200_*``,
77.8k / 194.4k img/s) were taken with the seed recipe; each row here is compared with them (target: within 10 %).
Writes ``train-throughput-aug.json`` and ``.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_throughput as tt

BASELINE = {"32": 77_800.0, "256": 194_400.0}  # benchmarks/train_h200_2026-12-01.md, the seed recipe
TOLERANCE = 0.10


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    ap.add_argument("--images", type=int, default=20_480)
    ap.add_argument("--recipes", nargs="+", default=["none", "seed", "default"])
    args = ap.parse_args()
    import torch

    from gpukit.train.augment import RECIPES

    if not torch.cuda.is_available():
        print("error: no CUDA GPU: this benchmark needs one", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="gpukit-tp-aug-"))
    gen_s = tt.generate(tmp / "data", args.images)
    rows: dict[str, dict] = {}
    for name in args.recipes:
        for batch in (32, 256):
            t0 = time.perf_counter()
            r = tt.measure(lambda b=batch, n=name: tt.gpukit_summary(tmp / "data", b, 6, tmp / f"run-{n}-{b}",
                                                                     augment=RECIPES[n]))  # fmt: skip
            rate = r.get("images_per_s")
            r["vs_baseline"] = rate / BASELINE[str(batch)] if rate else None
            r["within_10pct"] = bool(rate and rate >= (1 - TOLERANCE) * BASELINE[str(batch)])
            rows[f"{name}/{batch}"] = r
            print(f"{name} batch {batch}: {tt.num(rate)} img/s ({tt.num(r['vs_baseline'], '.3f')} of the baseline), "
                  f"CUDA graphs {r.get('cuda_graphs')} ({time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    doc = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "python": platform.python_version(),
           "images": args.images, "generate_s": gen_s, "baseline": BASELINE, "command": " ".join(sys.argv),
           "date": time.strftime("%Y-%m-%d"), "rows": rows}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train-throughput-aug.json").write_text(json.dumps(doc, indent=2))
    lines = [f"Seed CNN, {args.images} JPEGs 64×64, {doc['gpu']}, torch {doc['torch']}; median img/s of epochs 2–6.",
             "", "| recipe | batch | img/s | of 2026-12-01 (seed recipe) | within 10 %? | CUDA graph |",
             "| --- | ---: | ---: | ---: | --- | --- |"]  # fmt: skip
    for key, r in rows.items():
        name, batch = key.split("/")
        lines.append(f"| {name} | {batch} | {tt.num(r.get('images_per_s'))} | {tt.num(r['vs_baseline'], '.3f')} | "
                     f"{'yes' if r['within_10pct'] else 'no'} | {r.get('cuda_graphs')} |")  # fmt: skip
    (args.out / "train-throughput-aug.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
