"""`gpukit train`'s default recipe on small real image sets that ship inside packages, held-out accuracy.

Data sets (built into folders of PNGs; train / val / held-out split per class, seeded; the held-out images are
never seen by `gpukit train`, neither for training nor for choosing the best epoch):
- ``digits-3v7``: scikit-learn's ``load_digits`` — real scans of handwritten digits (8×8, 16 grey levels), the
  classes 3 and 7 (not mirror-symmetric: a mirrored 3 is "Ɛ"), upscaled to the image size.
- ``digits-5``: the same scans, five classes 2, 3, 4, 5, 7.
- ``lfw-faces``: scikit-image's ``data.lfw_subset`` — 100 real photographs of faces and 100 of non-faces (25×25).
- ``generated-stripes``: a generated cats-vs-dogs-like set at 32×32 (its own size, whatever ``--image-size``): one
  striped square patch per image, 10–16 px across, at a random place, stripes 2 or 3 px wide in two random tints;
  the class is the stripes' orientation (horizontal = "cat", vertical = "dog"). A left-right mirror keeps the
  orientation and maps the patch's place and phase onto places and phases the generator draws equally often, so
  every image's mirror image belongs to the same class (mirror-symmetric data, as cats and dogs are); the "dog"
  distribution is the "cat" one transposed, so mean colour, colour histogram and patch size carry no class signal.
  ``check_stripes`` verifies both in code (a gradient-orientation rule and a mean-colour baseline, in the JSON).
  Trained with ``--hflip`` as well as the default.
- ``generated-mirror``: the earlier generator (warm vs cool scenes with a round vs a square blob at 16×16, whose
  class tints overlap); kept so the earlier rows can be re-run, no longer in the default list.
Each data set × model × seed runs ``python -m gpukit train`` (the CLI, default recipe, ``--image-size``), then
``gpukit.train.predict`` on the held-out images with the run's ``best`` and ``last`` checkpoints.

    PYTHONPATH=src python benchmarks/scripts/train_recipe.py --out benchmarks  [--models seed-cnn resnet18]

On a GPU, the ResNet-18 rows the CPU run left out, all twelve runs at once (prints each run's wall time):

    PYTHONPATH=src python3 benchmarks/scripts/train_recipe.py --device cuda --hardware h200 --jobs 12 --workers 1 \
        --out $OUT --rows resnet18:digits-5 resnet18:lfw-faces resnet18:generated-stripes:default \
        resnet18:generated-stripes:--hflip

``--rows MODEL:DATASET[:RECIPE]`` picks rows (RECIPE ``default`` or ``--hflip``; without it both for a generated
set, the default for the others), ``--seeds`` the seeds, ``--data-dir DIR`` builds the data sets there once and
reuses them later (``--build-only`` stops after building: build on a machine with scikit-learn and scikit-image,
copy the folder, a few MB, and run where they are missing), ``--merge FILE.json`` adds the rows to an earlier JSON
(replacing rows of the same data set, model and recipe) and writes both files anew.

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
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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


STRIPES_SIZE = 32


def stripes_images(n_per_class: int, size: int = STRIPES_SIZE, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """``n_per_class`` images of each class, (N, size, size, 3) floats in [0, 1], labels 0 = horizontal stripes
    ("cat"), 1 = vertical ("dog"). Every random draw (background, noise, patch size and place, tints, stripe width
    and phase) comes from the same distribution for both classes; class 1 is built as class 0's pattern transposed."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label in (0, 1):
        for _ in range(n_per_class):
            img = rng.uniform(0.15, 0.85, 3) + rng.normal(0, 0.04, (size, size, 3))
            w = int(rng.integers(10, 17))  # patch side, px
            y0, x0 = (int(v) for v in rng.integers(0, size - w + 1, 2))  # uniform: a mirror maps x0 -> size-w-x0
            half = int(rng.choice([2, 3]))  # stripe width, px
            phase = int(rng.integers(0, 2 * half))
            dark, light = rng.uniform(0.05, 0.45, 3), rng.uniform(0.55, 0.95, 3)
            if rng.random() < 0.5:
                dark, light = light, dark
            band = ((np.arange(w) + phase) // half) % 2  # one stripe index per row (or column)
            pattern = np.where(band[:, None, None] == 1, light, dark) * np.ones((w, w, 1))  # horizontal stripes
            if label == 1:
                pattern = pattern.transpose(1, 0, 2)
            img[y0 : y0 + w, x0 : x0 + w] = pattern + rng.normal(0, 0.04, (w, w, 3))
            images.append(np.clip(img, 0, 1))
            labels.append(label)
    return np.stack(images), np.asarray(labels)


def orientation_rule(img: np.ndarray) -> int:
    """0 when vertical changes (row to row) outweigh horizontal ones (horizontal stripes), else 1. A left-right
    mirror permutes and negates the horizontal differences and permutes the vertical ones: the sums are unchanged."""
    dy = np.abs(np.diff(img, axis=0)).sum()
    dx = np.abs(np.diff(img, axis=1)).sum()
    return 0 if dy > dx else 1


def check_stripes(images: np.ndarray, labels: np.ndarray) -> dict:
    """The generated set's own checks: the orientation rule's accuracy (the set's ceiling is ~1, not unknown), that
    it gives every image and its mirror image the same class, and a mean-colour baseline (nearest class centroid of
    the per-image RGB means, fitted on half the images, scored on the other half), which should sit near chance."""
    rule = np.array([orientation_rule(im) for im in images])
    mirrored = np.array([orientation_rule(im[:, ::-1]) for im in images])
    means = images.mean(axis=(1, 2))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(images))
    fit, score = order[: len(order) // 2], order[len(order) // 2 :]
    centroids = np.stack([means[fit][labels[fit] == c].mean(axis=0) for c in (0, 1)])
    guess = np.argmin(((means[score][:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    return {
        "images": len(images),
        "orientation_rule_accuracy": float((rule == labels).mean()),
        "mirror_same_class": float((mirrored == rule).mean()),
        "mirror_pixels_differ": float(np.mean([np.abs(im - im[:, ::-1]).mean() > 0.01 for im in images])),
        "mean_colour_baseline_accuracy": float((guess == labels[score]).mean()),
        "class_mean_rgb": [[round(float(v), 4) for v in means[labels == c].mean(axis=0)] for c in (0, 1)],
    }


def build_stripes(root: Path, per_class: int = 300) -> dict:
    images, labels = stripes_images(per_class)
    checks = check_stripes(images, labels)
    if checks["orientation_rule_accuracy"] < 0.99 or checks["mirror_same_class"] < 1.0:
        raise RuntimeError(f"generated-stripes failed its own checks: {checks}")
    _split_write(root, images, labels, ["cat", "dog"], STRIPES_SIZE, seed=1234)
    return checks


_PREDICT_LOCK = threading.Lock()  # runs finish in several threads; score one checkpoint at a time


def heldout_accuracy(checkpoint: Path, heldout: Path, device: str) -> tuple[float, int]:
    from gpukit.train.predict import predict

    with _PREDICT_LOCK:
        rows, skipped = predict(checkpoint, [heldout], device=device)
    assert not skipped, skipped
    right = sum(Path(r.path).parent.name == r.label for r in rows)
    return right / len(rows), len(rows)


def run_one(data_root: Path, model: str, seed: int, size: int, extra: list[str], work: Path, device: str,
            workers: int | None = None) -> dict:  # fmt: skip
    out = work / f"run-{data_root.name}-{model}-{seed}-{'-'.join(extra) or 'default'}"
    cmd = [sys.executable, "-m", "gpukit", "train", str(data_root / "data"), "--model", model, "--seed", str(seed),
           "--image-size", str(size), "--device", device, "--out", str(out), "--json", *extra]  # fmt: skip
    if workers:
        cmd += ["--workers", str(workers)]
    t0 = time.perf_counter()
    # one intra-op thread: on a small, shared CPU torch's spinning OpenMP threads made steps 10x slower
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    label = f"{data_root.name} {model} {' '.join(extra) or 'default'} seed {seed}"
    if proc.returncode != 0:
        print(f"  {label}: error after {wall:.1f} s: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return {"error": proc.stderr[-2000:], "wall_s": wall, "command": " ".join(cmd[1:])}
    doc = json.loads(proc.stdout)
    try:
        best_acc, n = heldout_accuracy(out / "best.json", data_root / "heldout", device)
        last_acc, _ = heldout_accuracy(out / "last.json", data_root / "heldout", device)
    except Exception as exc:  # one failed scoring must not lose the other runs' results
        print(f"  {label}: scoring failed: {exc!r}", flush=True)
        return {"error": f"scoring: {exc!r}", "wall_s": wall, "command": " ".join(cmd[1:])}
    last = doc["epochs"][-1]
    times = doc["times"]
    print(f"  {label}: held-out best {best_acc:.3f} last {last_acc:.3f}; wall {wall:.1f} s (train "
          f"{times.get('train_s', 0):.1f}, save {times.get('save_s', 0):.1f}, start-up "
          f"{times.get('startup_s', 0):.1f})", flush=True)  # fmt: skip
    return {
        "heldout_images": n, "heldout_accuracy_best": best_acc, "heldout_accuracy_last": last_acc,
        "val_accuracy_last": last["val_accuracy"], "val_accuracy_mirrored": doc["val_accuracy_mirrored"],
        "best_epoch": doc["best_epoch"], "epochs": len(doc["epochs"]), "train_images": doc["train_images"],
        "val_images": doc["val_images"], "wall_s": wall, "times": times, "warnings": doc["warnings"],
        "notes": doc["notes"], "command": "gpukit " + " ".join(cmd[3:]).replace(str(work), "WORK"),
    }  # fmt: skip


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


LABELS = {"generated-mirror": "generated-mirror (earlier generator)"}


def to_markdown(doc: dict) -> str:
    sessions = doc.get("sessions") or [{"git": doc["git"], "command": doc["command"]}]
    runs_by = "; ".join(f"`{s['command']}` (at {s['git']})" for s in sessions)
    device = doc.get("device", "no GPU")
    lines = [
        f"# `gpukit train` default recipe: held-out accuracy on small real image sets ({doc['hardware']})",
        "",
        f"Date {doc['date']}; gpukit from source; torch {doc['torch']}, Python {doc['python']}; "
        f"{doc['cpus']} CPU cores, {device}. Commands: {runs_by}. JSON: `{doc['json']}`.",
        "",
        "Each row: `gpukit train` with the default recipe (augmentation `default` = shear 0.2°, zoom 0.2, **no flip**;"
        " at least 500 steps; warm-up + cosine; best = lowest validation loss, min-delta 0.001) at the image size "
        f"shown, seeds {', '.join(map(str, doc['seeds']))}. Held-out images "
        "(20 % per class) are never seen by the run; they are scored with `gpukit.train.predict` on the run's "
        "`best` and `last` checkpoints.",
        "",
        "| data set | size | model | recipe | held-out n | held-out acc (best), per seed | min | held-out acc (last), "
        "per seed | val acc mirrored | wall s (mean) | ≥ 95 %? |",
        "| --- | ---: | --- | --- | ---: | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in doc["rows"]:
        runs = row["runs"]
        ok = [r for r in runs if "error" not in r]
        name = LABELS.get(row["dataset"], row["dataset"])
        size = row.get("image_size", doc["image_size"])
        if not ok:
            lines.append(f"| {name} | {size} | {row['model']} | {row['recipe']} | – | error: "
                         f"{runs[0]['error'][-200:]!r} | | | | | no |")  # fmt: skip
            continue
        best = [r["heldout_accuracy_best"] for r in ok]
        last = [r["heldout_accuracy_last"] for r in ok]
        mirrored = [r["val_accuracy_mirrored"] for r in ok if r["val_accuracy_mirrored"] is not None]
        wall = sum(r["wall_s"] for r in ok) / len(ok)
        meets = "yes" if min(best) >= TARGET and len(ok) == len(runs) else "**no**"
        lines.append(
            f"| {name} | {size} | {row['model']} | {row['recipe']} | {ok[0]['heldout_images']} | "
            f"{' / '.join(_fmt(v) for v in best)} | {_fmt(min(best))} | {' / '.join(_fmt(v) for v in last)} | "
            f"{_fmt(min(mirrored)) if mirrored else 'n/a'} | {wall:.0f} | {meets} |"
        )
    if doc.get("datasets"):
        lines += ["", "The generated set's own checks (on all its images, before the split):", ""]
        for name, c in doc["datasets"].items():
            lines.append(
                f"- {name}: {c['images']} images; the orientation rule (row-to-row vs column-to-column change) "
                f"scores {c['orientation_rule_accuracy']:.3f} and gives the mirror image the same class for "
                f"{c['mirror_same_class']:.3f} of them ({c['mirror_pixels_differ']:.3f} of mirror images differ "
                f"from the image); a mean-colour nearest-centroid baseline scores "
                f"{c['mean_colour_baseline_accuracy']:.3f}; class mean RGB {c['class_mean_rgb'][0]} vs "
                f"{c['class_mean_rgb'][1]}"
            )
    lines += ["", "Warnings the runs printed (first run of each row):", ""]
    for row in doc["rows"]:
        ok = [r for r in row["runs"] if "error" not in r]
        if ok and ok[0]["warnings"]:
            name = LABELS.get(row["dataset"], row["dataset"])
            lines.append(f"- {name} / {row['model']} / {row['recipe']}: {'; '.join(ok[0]['warnings'])}")
    return "\n".join(lines) + "\n"


DATASETS = ["digits-3v7", "digits-5", "lfw-faces", "generated-stripes"]
GENERATED = {"generated-mirror", "generated-stripes"}


def _fail(message: str) -> SystemExit:
    """Bad input: the message and exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(2)


def parse_rows(args: argparse.Namespace, limits: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """(model, data set, recipe) triples, from --rows or from --models × --datasets (and --limit)."""
    known = [*DATASETS, "generated-mirror"]
    if args.rows:
        picked = []
        for item in args.rows:
            parts = item.split(":", 2)
            if len(parts) < 2 or parts[1] not in known or (len(parts) == 3 and parts[2] not in ("default", "--hflip")):
                raise _fail(f"--rows {item!r}: want MODEL:DATASET[:RECIPE], DATASET one of "
                                 f"{', '.join(known)}, RECIPE default or --hflip")  # fmt: skip
            both = ["default", "--hflip"] if parts[1] in GENERATED else ["default"]
            recipes = [parts[2]] if len(parts) == 3 else both
            picked += [(parts[0], parts[1], r) for r in recipes]
        return list(dict.fromkeys(picked))  # a row named twice runs once
    for name in args.datasets:
        if name not in known:
            raise _fail(f"--datasets {name!r}: one of {', '.join(known)}")
    return [(model, name, recipe) for model in args.models for name in limits.get(model, args.datasets)
            for recipe in (["default", "--hflip"] if name in GENERATED else ["default"])]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks"), help="folder for the .md and json/ .json")
    ap.add_argument("--models", nargs="+", default=["seed-cnn", "resnet18"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="+", default=DATASETS)
    ap.add_argument("--rows", nargs="+", default=[], metavar="MODEL:DATASET[:RECIPE]",
                    help="run only these rows (overrides --models/--datasets/--limit)")  # fmt: skip
    ap.add_argument("--image-size", type=int, default=16, help="for the packaged sets (generated-stripes: 32)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time (on a GPU: several share it)")
    ap.add_argument("--hardware", default=None, help="name in the file names (default: cpu, or gpu with --device cuda)")
    ap.add_argument("--merge", type=Path, default=None, help="earlier JSON to add these rows to")
    ap.add_argument("--work", type=Path, default=None, help="folder for data and run folders (default: a temp dir)")
    ap.add_argument("--workers", type=int, default=None, help="gpukit train --workers (decode processes per run)")
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="build the data sets here, or reuse them if built (then no scikit-learn/-image is needed)",
    )
    ap.add_argument("--build-only", action="store_true", help="build the data sets (into --data-dir) and stop")
    ap.add_argument(
        "--limit",
        nargs="*",
        default=[],
        metavar="MODEL=DATASET,…",
        help="run MODEL only on these data sets (e.g. resnet18=digits-3v7 on a slow CPU)",
    )
    args = ap.parse_args()
    if args.jobs < 1:
        raise _fail("--jobs must be at least 1")
    limits = {k: v.split(",") for k, v in (item.split("=", 1) for item in args.limit)}
    rows = parse_rows(args, limits)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise _fail("--device cuda but torch sees no GPU")
    hardware = args.hardware or ("gpu" if args.device == "cuda" else "cpu")
    work = Path(tempfile.mkdtemp(prefix="train-recipe-", dir=args.work))
    sizes = {name: STRIPES_SIZE if name == "generated-stripes" else args.image_size for name in DATASETS}
    sizes["generated-mirror"] = args.image_size
    builders: dict[str, Callable[[Path], dict | None]] = {
        "digits-3v7": lambda r: build_digits(r, [3, 7], args.image_size),
        "digits-5": lambda r: build_digits(r, [2, 3, 4, 5, 7], args.image_size),
        "lfw-faces": lambda r: build_lfw(r, args.image_size),
        "generated-mirror": lambda r: build_mirror(r, args.image_size),
        "generated-stripes": build_stripes,
    }
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    stem = f"train-recipe_{hardware}_{date}"
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    command = "PYTHONPATH=src python " + " ".join(sys.argv)
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "no GPU"
    if args.merge:
        doc = json.loads(args.merge.read_text())
        doc.setdefault("sessions", [{"git": doc["git"], "command": doc["command"]}])
    else:
        doc = {"hardware": hardware, "date": date, "git": git, "torch": torch.__version__,
               "python": platform.python_version(), "cpus": os.cpu_count(), "device": device_name,
               "image_size": args.image_size, "seeds": args.seeds, "command": command,
               "json": f"benchmarks/json/{stem}.json", "rows": [], "sessions": []}  # fmt: skip
    doc["sessions"].append({"git": git, "command": command, "device": device_name, "seeds": args.seeds})
    doc.setdefault("datasets", {})
    data_dir = args.data_dir or work
    for name in dict.fromkeys(name for _, name, _ in rows):
        root = data_dir / name
        done = root / ".built"
        if done.exists() and done.read_text() == str(sizes[name]):
            checks = check_stripes(*stripes_images(300)) if name == "generated-stripes" else None
            print(f"{name}: reusing {root}", flush=True)
        else:
            checks = builders[name](root)
            done.write_text(str(sizes[name]))
        if checks:
            doc["datasets"][name] = checks
            print(f"{name}: {checks}", flush=True)
    if args.build_only:
        print(f"data sets built under {data_dir}", flush=True)
        return 0
    t_all = time.perf_counter()
    tasks = [(model, name, recipe, seed) for model, name, recipe in rows for seed in args.seeds]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {}
        for model, name, recipe, seed in tasks:
            extra = [] if recipe == "default" else [recipe]
            futures[(model, name, recipe, seed)] = pool.submit(
                run_one, data_dir / name, model, seed, sizes[name], extra, work, args.device, args.workers
            )
        for model, name, recipe in rows:
            runs = [futures[(model, name, recipe, seed)].result() for seed in args.seeds]
            new = {"dataset": name, "model": model, "recipe": recipe, "image_size": sizes[name], "git": git,
                   "device": device_name, "runs": runs}  # fmt: skip
            doc["rows"] = [r for r in doc["rows"] if (r["dataset"], r["model"], r["recipe"]) != (name, model, recipe)]
            doc["rows"].append(new)
            print(f"{name} {model} {recipe}: held-out (best) " + ", ".join(
                f"{r.get('heldout_accuracy_best', 'error')}" for r in runs), flush=True)  # fmt: skip
            (args.out / "json").mkdir(parents=True, exist_ok=True)
            (args.out / "json" / f"{stem}.json").write_text(json.dumps(doc, indent=2))
            (args.out / f"{stem}.md").write_text(to_markdown(doc))
    print(f"all {len(tasks)} runs: {time.perf_counter() - t_all:.1f} s wall ({args.jobs} at a time)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
