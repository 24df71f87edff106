"""`gpukit train`'s recipes on a suite of small image sets: held-out accuracy and time to train, three seeds.

The sets (``train_recipe_sets.py`` builds them; each has held-out images that no run sees, neither to train nor to
choose its best epoch): digit scans and LFW faces (scikit-learn, scikit-image), crops of three CC0 texture
photographs (scikit-image), four generators of shapes at random places, sizes, rotations and colours (circles vs
squares, triangles vs stars on noise, crosses vs rings on clutter, small squares vs triangles) and striped patches.

The recipes, each a `python -m gpukit train DATA ...` command in a process of its own:
- ``default``: the plain command, ``gpukit train DATA`` (nothing but ``--out``, ``--json`` and the device);
- ``seed``: the article's recipe, ``--model seed-cnn --augment seed --epochs 25 --min-steps 0 --lr 1e-3
  --weight-decay 0 --label-smoothing 0 --schedule constant`` (Keras' Adam, 25 epochs, shear/zoom/flip);
- ``previous``: gpukit's default before this recipe: ResNet-18, shear/zoom without flip (``--augment classic``),
  Adam 1e-3 without weight decay or label smoothing, ≥ 500 steps, warm-up + cosine;
- ``crop-0.5``, ``size-128``, ``steps-2000`` (only when asked): the default with a crop down to half the area (the
  first value tried), with ``--image-size 128`` (small objects get twice the pixels), and with the 2,000 steps the
  first small-cnn took (``--min-steps 2000``; the default was 1,200 then and is 3,600 since run 5);
  ``rotation-0`` (only when asked): the default without its ±30° rotation, i.e. run 5's default.
Each run is scored with ``gpukit.train.predict`` on the held-out images with its ``best`` checkpoint (what the
user gets); ``last`` is recorded too.

    PYTHONPATH=src python benchmarks/scripts/train_recipe.py --data-dir .wt/recipe-data --build-only
    PYTHONPATH=src python benchmarks/scripts/train_recipe.py --data-dir D --device cuda --hardware h200 --jobs 12
    PYTHONPATH=src python benchmarks/scripts/train_recipe.py --data-dir D --device cpu --cores 0,1 --recipes default

``--cores 0,1`` pins every run to those cores (``sched_setaffinity``; with ``CUDA_VISIBLE_DEVICES=""`` and two intra-op
threads): a 2-core CPU machine emulated on a larger host. ``--alone-seeds 0`` runs the ``default`` recipe again for
those seeds, one run at a time after the parallel ones, so that its time is not shared with other runs (the table
shows both).
Writes ``train-recipe_<hw>_<date><suffix>.md`` and ``json/…json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_recipe_sets as sets

TARGET = 0.95
DEFAULT_RECIPES = ["default", "seed", "previous"]
DATASETS = ["digits-3v7", "digits-5", "lfw-faces", "photo-textures", "shapes-circle-square", "shapes-triangle-star",
            "shapes-clutter", "shapes-small", "stripes"]  # fmt: skip
RECIPES = {
    "default": [],
    "seed": ["--model", "seed-cnn", "--augment", "seed", "--epochs", "25", "--min-steps", "0", "--lr", "1e-3",
             "--weight-decay", "0", "--label-smoothing", "0", "--schedule", "constant"],
    "crop-0.5": ["--crop", "0.5"],  # the default with the larger crop it was first tried with
    "size-128": ["--image-size", "128"],  # the default on images upscaled 2x: finer detail for small objects
    "steps-2000": ["--min-steps", "2000"],  # the default with the step budget of the first small-cnn
    "rotation-0": ["--rotation-deg", "0"],  # the default without its rotation: run 5's default
    "fp32": ["--amp", "off"],  # the default in fp32: what --amp auto trains in on a CPU without AMX
    "previous": ["--model", "resnet18", "--augment", "classic", "--epochs", "25", "--min-steps", "500", "--lr",
                 "1e-3", "--weight-decay", "0", "--label-smoothing", "0", "--schedule", "cosine"],
}  # fmt: skip
_PREDICT_LOCK = threading.Lock()  # runs finish in several threads; score one checkpoint at a time


def _fail(message: str) -> SystemExit:
    """Bad input: the message and exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(2)


def heldout_accuracy(checkpoint: Path, heldout: Path, device: str) -> tuple[float, int]:
    from gpukit.train.predict import predict

    with _PREDICT_LOCK:
        rows, skipped = predict(checkpoint, [heldout], device=device)
    assert not skipped, skipped
    return sum(Path(r.path).parent.name == r.label for r in rows) / len(rows), len(rows)


def run_one(root: Path, recipe: str, seed: int, work: Path, device: str, cores: str | None, alone: bool) -> dict:
    out = work / f"run-{root.name}-{recipe}-{seed}-{'alone' if alone else 'shared'}"
    cmd = [sys.executable, "-m", "gpukit", "train", str(root / "data"), *RECIPES[recipe], "--seed", str(seed),
           "--device", device, "--out", str(out), "--json"]  # fmt: skip
    env = dict(os.environ)
    pin = None
    if cores:  # the run and everything it starts (its decode workers) on these cores only, as taskset -c would
        ids = {int(c) for c in cores.split(",")}
        pin = lambda: os.sched_setaffinity(0, ids)  # noqa: E731
        env.update(CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS=str(len(ids)))
    else:  # on a shared host one intra-op thread per run: spinning OpenMP threads made steps 10x slower
        env.setdefault("OMP_NUM_THREADS", "1")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, preexec_fn=pin)
    wall = time.perf_counter() - t0
    label = f"{root.name} {recipe} seed {seed}{' (alone)' if alone else ''}"
    shown = "gpukit train " + " ".join(cmd[4:]).replace(str(work), "WORK")
    if proc.returncode != 0:
        print(f"  {label}: error after {wall:.1f} s: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return {"error": proc.stderr[-2000:], "wall_s": wall, "command": shown, "alone": alone}
    doc = json.loads(proc.stdout)
    try:
        best, n = heldout_accuracy(out / "best.json", root / "heldout", device)
        last, _ = heldout_accuracy(out / "last.json", root / "heldout", device)
    except Exception as exc:  # one failed scoring must not lose the other runs' results
        return {"error": f"scoring: {exc!r}", "wall_s": wall, "command": shown, "alone": alone}
    print(f"  {label}: held-out {best:.3f} (last {last:.3f}); wall {wall:.1f} s, train "
          f"{doc['times']['train_s']:.1f} s; {doc['verdict']}", flush=True)  # fmt: skip
    return {"heldout_images": n, "heldout_accuracy_best": best, "heldout_accuracy_last": last,
            "val_accuracy_last": doc["epochs"][-1]["val_accuracy"], "verdict": doc["verdict"],
            "model": doc["model"], "best_epoch": doc["best_epoch"], "epochs": len(doc["epochs"]),
            "train_images": doc["train_images"], "val_images": doc["val_images"], "wall_s": wall,
            "times": doc["times"], "warnings": doc["warnings"], "notes": doc["notes"], "command": shown,
            "alone": alone}  # fmt: skip


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def row_line(row: dict) -> str:
    runs = row["runs"]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return f"| {row['dataset']} | {row['recipe']} | – | error: {runs[0]['error'][-160:]!r} | | | | | | | **no** |"
    best = [r["heldout_accuracy_best"] for r in ok]
    wall = statistics.mean(r["wall_s"] for r in ok)
    train = statistics.mean(r["times"]["train_s"] for r in ok)
    alone = [r for r in row.get("alone", []) if "error" not in r]
    alone_s = " / ".join(f"{r['wall_s']:.1f}" for r in alone) if alone else "–"
    verdicts = sorted({r["verdict"] for r in ok})
    meets = "yes" if min(best) >= TARGET and len(ok) == len(runs) else "**no**"
    return (f"| {row['dataset']} | {row['recipe']} ({ok[0]['model']}) | {ok[0]['heldout_images']} | "
            f"{' / '.join(_fmt(v) for v in best)} | {statistics.mean(best):.3f} | {min(best):.3f} | "
            f"{wall:.1f} | {alone_s} | {train:.1f} | {', '.join(verdicts)} | {meets} |")  # fmt: skip


def to_markdown(doc: dict) -> str:
    lines = [
        f"# `gpukit train` recipes on {len({r['dataset'] for r in doc['rows']})} small image sets ({doc['hardware']})",
        "",
        f"Date {doc['date']}; gpukit at {doc['git']}; torch {doc['torch']}, Python {doc['python']}; {doc['cpus']} CPU "
        f"cores visible{', runs pinned to cores ' + doc['cores'] if doc.get('cores') else ''}; {doc['device']}. "
        f"Command: `{doc['command']}`. JSON: `{doc['json']}`.",
        "",
        "Recipes: " + "; ".join(f"**{k}** `gpukit train DATA {' '.join(v)}`" for k, v in RECIPES.items()) + ".",
        f"Seeds {', '.join(map(str, doc['seeds']))}. Held-out accuracy of the run's `best` checkpoint (`predict`). "
        "Wall: the whole `gpukit train` process, start to exit, mean over the seeds, "
        + (
            f"measured while {doc['jobs']} runs shared the machine (*shared*: slower than alone)"
            if doc["jobs"] > 1
            else "one run at a time (the *shared* column)"
        )
        + "; *alone*: the default recipe run again, one run at a time (seeds "
        + (", ".join(map(str, doc["alone_seeds"])) or "none")
        + "). Train: the training loop's own "
        "seconds (`times.train_s`), mean.",
        "",
        "| data set | recipe (model) | held-out n | held-out acc per seed | mean | worst | wall s shared | "
        "wall s alone | train s | verdict | ≥ 95 % every seed? |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    order = {name: i for i, name in enumerate(DATASETS + list(sets.PROBES))}
    rows = sorted(doc["rows"], key=lambda r: (order.get(r["dataset"], 99), list(RECIPES).index(r["recipe"])))
    lines += [row_line(r) for r in rows]
    if doc.get("checks"):
        lines += ["", "The stripes set's own checks: " + json.dumps(doc["checks"])]
    return "\n".join(lines) + "\n"


def write(out: Path, stem: str, doc: dict) -> None:
    """The JSON and the table, rewritten after every row (a call that runs out of time keeps what it measured)."""
    (out / "json").mkdir(parents=True, exist_ok=True)
    (out / "json" / f"{stem}.json").write_text(json.dumps(doc, indent=2))
    (out / f"{stem}.md").write_text(to_markdown(doc))


def parse_rows(args: argparse.Namespace) -> list[tuple[str, str]]:
    for name in args.datasets:
        if name not in DATASETS and name not in sets.PROBES:
            raise _fail(f"--datasets {name!r}: one of {', '.join(DATASETS + list(sets.PROBES))}")
    for name in args.recipes:
        if name not in RECIPES:
            raise _fail(f"--recipes {name!r}: one of {', '.join(RECIPES)}")
    return [(d, r) for d in args.datasets for r in args.recipes]


def build(data_dir: Path, names: list[str]) -> dict:
    built = sets.builders()
    checks: dict = {}
    for name in names:
        root = data_dir / name
        if not (root / ".built").exists():
            result = built[name](root)
            (root / ".built").write_text("ok")
            if result:
                checks[name] = result
        print(f"{name}: {root}", flush=True)
    return checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks"), help="folder for the .md and json/ .json")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="+", default=DATASETS)
    ap.add_argument("--recipes", nargs="+", default=DEFAULT_RECIPES)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time")
    ap.add_argument("--cores", default=None, help="pin each run to these cores, e.g. 0,1 (taskset; CPU only)")
    ap.add_argument("--alone-seeds", nargs="*", type=int, default=[],
                    help="run the default recipe again for these seeds, one run at a time, after the rest")  # fmt: skip
    ap.add_argument("--only-alone", action="store_true", help="with --alone-seeds: run nothing else")
    ap.add_argument("--hardware", default=None, help="name in the file names (default: cpu, or gpu with cuda)")
    ap.add_argument("--suffix", default="", help="added to the file names, e.g. -run2")
    ap.add_argument("--work", type=Path, default=None, help="folder for the run folders (default: a temp dir)")
    ap.add_argument("--data-dir", type=Path, default=None, help="build the sets here, or reuse them if built")
    ap.add_argument("--build-only", action="store_true", help="build the sets (into --data-dir) and stop")
    args = ap.parse_args()
    if args.jobs < 1:
        raise _fail("--jobs must be at least 1")
    rows = parse_rows(args)
    work = Path(tempfile.mkdtemp(prefix="train-recipe-", dir=args.work))
    data_dir = args.data_dir or work
    checks = build(data_dir, list(dict.fromkeys(d for d, _ in rows)))
    if args.build_only:
        return 0
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise _fail("--device cuda but torch sees no GPU")
    hardware = args.hardware or ("gpu" if args.device == "cuda" else "cpu")
    stem = f"train-recipe_{hardware}_{datetime.now(UTC):%Y-%m-%d}{args.suffix}"
    git = os.environ.get("GPUKIT_GIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                         text=True, check=False).stdout.strip()  # fmt: skip
    doc = {"hardware": hardware, "date": f"{datetime.now(UTC):%Y-%m-%d}", "git": git or "unknown",
           "torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
           "cores": args.cores, "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "no GPU",
           "seeds": args.seeds, "jobs": args.jobs, "alone_seeds": args.alone_seeds,
           "command": "PYTHONPATH=src python " + " ".join(sys.argv),
           "json": f"benchmarks/json/{stem}.json", "rows": [], "checks": checks}  # fmt: skip
    t_all = time.perf_counter()
    # the default recipe first (alone, then shared): if the call runs out of time, what matters most is done
    alone = {d: [run_one(data_dir / d, "default", s, work, args.device, args.cores, True) for s in args.alone_seeds]
             for d, r in rows if r == "default"}  # fmt: skip
    rows = sorted(rows, key=lambda k: k[1] != "default")
    if args.only_alone:
        doc["rows"] = [{"dataset": d, "recipe": r, "runs": alone[d], "alone": alone[d]} for d, r in rows if d in alone]
        rows = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {(d, r, s): pool.submit(run_one, data_dir / d, r, s, work, args.device, args.cores, False)
                   for d, r in rows for s in args.seeds}  # fmt: skip
        for d, r in rows:
            runs = [futures[(d, r, s)].result() for s in args.seeds]
            doc["rows"].append({"dataset": d, "recipe": r, "runs": runs, "alone": alone.get(d, []) if r == "default"
                                else []})  # fmt: skip
            write(args.out, stem, doc)
    doc["total_s"] = time.perf_counter() - t_all
    write(args.out, stem, doc)
    print(to_markdown(doc), flush=True)
    print(f"all runs: {doc['total_s']:.1f} s wall ({args.jobs} at a time)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
