"""`gpukit train`'s default recipe on small real image sets that ship inside packages, held-out accuracy.

Data sets (built into folders of PNGs; train / val / held-out split per class, seeded; the held-out images are
never seen by `gpukit train`, neither for training nor for choosing the best epoch):
- ``digits-3v7``: scikit-learn's ``load_digits`` — real scans of handwritten digits (8×8, 16 grey levels), the
  classes 3 and 7 (not mirror-symmetric: a mirrored 3 is "Ɛ"), upscaled to the image size.
- ``digits-5``: the same scans, five classes 2, 3, 4, 5, 7.
- ``lfw-faces``: scikit-image's ``data.lfw_subset`` — 100 real photographs of faces and 100 of non-faces (25×25).
- ``generated-mirror``: a generated cats-vs-dogs-like set (warm vs cool scenes, mirror-symmetric by construction),
  trained with ``--hflip`` as well as the default.
Each data set × model × seed runs ``python -m gpukit train`` (the CLI, default recipe, ``--image-size``), then
``gpukit.train.predict`` on the held-out images with the run's ``best`` and ``last`` checkpoints.

    PYTHONPATH=src python benchmarks/scripts/train_recipe.py --out benchmarks  [--models seed-cnn resnet18]

Needs scikit-learn and scikit-image (`pip install 'gpukit[bench-data]'`). Writes
``train-recipe_<hw>_<date>.md`` and ``json/train-recipe_<hw>_<date>.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

TARGET = 0.95


def _save(img: np.ndarray, path: Path, size: int) -> None:
    """A float image in [0, 1] (H,W) or (H,W,3) → an RGB PNG of size×size (bilinear upscale)."""
    from PIL import Image

    arr = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    im = Image.fromarray(arr).convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path)


def _split_write(root: Path, images: np.ndarray, labels: np.ndarray, names: list[str], size: int, seed: int) -> None:
    """Per class: 60 % train, 20 % val, 20 % held-out (root/data/{train,val}/CLASS, root/heldout/CLASS)."""
    rng = np.random.default_rng(seed)
    for label, name in enumerate(names):
        idx = np.flatnonzero(labels == label)
        rng.shuffle(idx)
        n_val = n_held = round(0.2 * len(idx))
        parts = {"heldout": idx[:n_held], "data/val": idx[n_held : n_held + n_val], "data/train": idx[n_held + n_val :]}
        for part, members in parts.items():
            for i in members:
                _save(images[i], root / part / name / f"{name}_{i:05d}.png", size)


def build_digits(root: Path, classes: list[int], size: int) -> None:
    from sklearn.datasets import load_digits

    d = load_digits()
    keep = np.isin(d.target, classes)
    images, target = d.images[keep] / 16.0, d.target[keep]
    labels = np.searchsorted(np.asarray(sorted(classes)), target)
    names = [f"digit{c}" for c in sorted(classes)]
    _split_write(root, 1.0 - images, labels, names, size, seed=1234)  # dark ink on white, as scanned


def build_lfw(root: Path, size: int) -> None:
    from skimage import data

    faces = data.lfw_subset()  # (200, 25, 25): the first 100 are faces, the rest are not
    labels = np.r_[np.zeros(100, int), np.ones(100, int)]
    _split_write(root, faces, labels, ["face", "nonface"], size, seed=1234)


def build_mirror(root: Path, size: int, per_class: int = 300) -> None:
    """Warm scenes with a round blob vs cool scenes with a square one, placed and sized at random: every image's
    mirror image is as likely as the image itself (mirror-symmetric data, as cats and dogs are)."""
    rng = np.random.default_rng(99)
    yy, xx = np.mgrid[0:size, 0:size] / size
    images, labels = [], []
    for label in (0, 1):
        for _ in range(per_class):
            base = rng.uniform(0.2, 0.6, 3)
            base[0 if label == 0 else 2] += 0.25  # warm vs cool tint
            img = np.broadcast_to(base, (size, size, 3)).copy() + rng.normal(0, 0.08, (size, size, 3))
            cx, cy, r = rng.uniform(0.25, 0.75), rng.uniform(0.25, 0.75), rng.uniform(0.1, 0.2)
            mask = ((xx - cx) ** 2 + (yy - cy) ** 2 < r * r) if label == 0 else (
                (abs(xx - cx) < r) & (abs(yy - cy) < r))  # fmt: skip
            img[mask] = rng.uniform(0.7, 1.0)
            images.append(img)
            labels.append(label)
    _split_write(root, np.stack(images), np.asarray(labels), ["cat", "dog"], size, seed=1234)


def heldout_accuracy(checkpoint: Path, heldout: Path) -> tuple[float, int]:
    from gpukit.train.predict import predict

    rows, skipped = predict(checkpoint, [heldout], device="cpu")
    assert not skipped, skipped
    right = sum(Path(r.path).parent.name == r.label for r in rows)
    return right / len(rows), len(rows)


def run_one(data_root: Path, model: str, seed: int, size: int, extra: list[str], work: Path) -> dict:
    out = work / f"run-{data_root.name}-{model}-{seed}-{'-'.join(extra) or 'default'}"
    cmd = [sys.executable, "-m", "gpukit", "train", str(data_root / "data"), "--model", model, "--seed", str(seed),
           "--image-size", str(size), "--device", "cpu", "--out", str(out), "--json", *extra]  # fmt: skip
    t0 = time.perf_counter()
    # one intra-op thread: on a small, shared CPU torch's spinning OpenMP threads made steps 10x slower
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:], "command": " ".join(cmd[1:])}
    doc = json.loads(proc.stdout)
    best_acc, n = heldout_accuracy(out / "best.json", data_root / "heldout")
    last_acc, _ = heldout_accuracy(out / "last.json", data_root / "heldout")
    last = doc["epochs"][-1]
    return {
        "heldout_images": n, "heldout_accuracy_best": best_acc, "heldout_accuracy_last": last_acc,
        "val_accuracy_last": last["val_accuracy"], "val_accuracy_mirrored": doc["val_accuracy_mirrored"],
        "best_epoch": doc["best_epoch"], "epochs": len(doc["epochs"]), "train_images": doc["train_images"],
        "val_images": doc["val_images"], "wall_s": wall, "times": doc["times"], "warnings": doc["warnings"],
        "notes": doc["notes"], "command": "gpukit " + " ".join(cmd[3:]).replace(str(work), "WORK"),
    }  # fmt: skip


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def to_markdown(doc: dict) -> str:
    lines = [
        f"# `gpukit train` default recipe: held-out accuracy on small real image sets ({doc['hardware']})",
        "",
        f"Date {doc['date']}; gpukit from source at {doc['git']}; torch {doc['torch']}, Python {doc['python']}; "
        f"{doc['cpus']} CPU cores, no GPU. Command: `{doc['command']}`. JSON: `{doc['json']}`.",
        "",
        "Each row: `gpukit train` with the default recipe (augmentation `default` = shear 0.2°, zoom 0.2, **no flip**;"
        " at least 500 steps; warm-up + cosine; best = lowest validation loss, min-delta 0.001) at "
        f"{doc['image_size']}×{doc['image_size']}, seeds {', '.join(map(str, doc['seeds']))}. Held-out images "
        "(20 % per class) are never seen by the run; they are scored with `gpukit.train.predict` on the run's "
        "`best` and `last` checkpoints.",
        "",
        "| data set | model | recipe | held-out n | held-out acc (best), per seed | min | held-out acc (last), per seed"
        " | val acc mirrored | wall s (mean) | ≥ 95 %? |",
        "| --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in doc["rows"]:
        runs = row["runs"]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            lines.append(f"| {row['dataset']} | {row['model']} | {row['recipe']} | – | error: "
                         f"{runs[0]['error'][-200:]!r} | | | | | no |")  # fmt: skip
            continue
        best = [r["heldout_accuracy_best"] for r in ok]
        last = [r["heldout_accuracy_last"] for r in ok]
        mirrored = [r["val_accuracy_mirrored"] for r in ok if r["val_accuracy_mirrored"] is not None]
        wall = sum(r["wall_s"] for r in ok) / len(ok)
        meets = "yes" if min(best) >= TARGET and len(ok) == len(runs) else "**no**"
        lines.append(
            f"| {row['dataset']} | {row['model']} | {row['recipe']} | {ok[0]['heldout_images']} | "
            f"{' / '.join(_fmt(v) for v in best)} | {_fmt(min(best))} | {' / '.join(_fmt(v) for v in last)} | "
            f"{_fmt(min(mirrored)) if mirrored else 'n/a'} | {wall:.0f} | {meets} |"
        )
    lines += ["", "Warnings the runs printed (first run of each row):", ""]
    for row in doc["rows"]:
        ok = [r for r in row["runs"] if "error" not in r]
        if ok and ok[0]["warnings"]:
            lines.append(f"- {row['dataset']} / {row['model']} / {row['recipe']}: {'; '.join(ok[0]['warnings'])}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks"))
    ap.add_argument("--models", nargs="+", default=["seed-cnn", "resnet18"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="+", default=["digits-3v7", "digits-5", "lfw-faces", "generated-mirror"])
    ap.add_argument("--image-size", type=int, default=16)
    ap.add_argument("--hardware", default="cpu")
    ap.add_argument(
        "--limit",
        nargs="*",
        default=[],
        metavar="MODEL=DATASET,…",
        help="run MODEL only on these data sets (e.g. resnet18=digits-3v7 on a slow CPU)",
    )
    args = ap.parse_args()
    limits = {k: v.split(",") for k, v in (item.split("=", 1) for item in args.limit)}
    import torch

    work = Path(tempfile.mkdtemp(prefix="train-recipe-"))
    builders = {
        "digits-3v7": lambda r: build_digits(r, [3, 7], args.image_size),
        "digits-5": lambda r: build_digits(r, [2, 3, 4, 5, 7], args.image_size),
        "lfw-faces": lambda r: build_lfw(r, args.image_size),
        "generated-mirror": lambda r: build_mirror(r, args.image_size),
    }
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    stem = f"train-recipe_{args.hardware}_{date}"
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc: dict = {"hardware": args.hardware, "date": date, "git": git, "torch": torch.__version__,
                 "python": platform.python_version(), "cpus": os.cpu_count(), "image_size": args.image_size,
                 "seeds": args.seeds, "command": "PYTHONPATH=src python " + " ".join(sys.argv),
                 "json": f"benchmarks/json/{stem}.json", "rows": []}  # fmt: skip
    for name in args.datasets:
        builders[name](work / name)
    for model in args.models:
        for name in limits.get(model, args.datasets):
            root = work / name
            recipes = [("default", [])] + ([("--hflip", ["--hflip"])] if name == "generated-mirror" else [])
            for recipe, extra in recipes:
                runs = [run_one(root, model, seed, args.image_size, extra, work) for seed in args.seeds]
                doc["rows"].append({"dataset": name, "model": model, "recipe": recipe, "runs": runs})
                print(f"{name} {model} {recipe}: " + ", ".join(
                    f"{r.get('heldout_accuracy_best', 'error')}" for r in runs), flush=True)  # fmt: skip
                (args.out / "json").mkdir(parents=True, exist_ok=True)
                (args.out / "json" / f"{stem}.json").write_text(json.dumps(doc, indent=2))
                (args.out / f"{stem}.md").write_text(to_markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
