"""Merge `train_recipe.py` result files (one call per run, as the shared 2-core CPU allows) into one table.

Each input is a ``json/train-recipe_*.json`` that `train_recipe.py` wrote; the rows of one (data set, recipe) from
all files are joined, seed by seed. ``--previous`` adds the first small-cnn's held-out accuracies (the default
before the full-resolution stage) from another result file, e.g. the H200 run 2, or an earlier merged file,
beside the new ones (``--previous-label`` names that column).

    python benchmarks/scripts/train_recipe_merge.py --out benchmarks --stem train-recipe_cpu_2026-12-02 \
        --previous benchmarks/json/train-recipe_h200_2026-12-01-run2.json RUN1.json RUN2.json ...
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_recipe import DATASETS, TARGET


def runs_by_set(docs: list[dict], recipe: str = "default") -> dict[str, list[dict]]:
    """Data set → its runs (with seed, load and git added), in seed order; errors kept."""
    out: dict[str, list[dict]] = {}
    for doc in docs:
        for row in doc["rows"]:
            if row["recipe"] != recipe:
                continue
            for seed, run in zip(doc["seeds"], row["runs"], strict=True):
                out.setdefault(row["dataset"], []).append({**run, "seed": seed, "git": doc["git"]})
    return {k: sorted(v, key=lambda r: r["seed"]) for k, v in out.items()}


def line(name: str, runs: list[dict], previous: list[float] | None) -> str:
    ok = [r for r in runs if "error" not in r]
    acc = [r["heldout_accuracy_best"] for r in ok]
    seeds = " / ".join(f"{r['seed']}: {r['heldout_accuracy_best']:.3f}" if "error" not in r else f"{r['seed']}: error"
                       for r in runs)  # fmt: skip
    wall = " / ".join(f"{r['wall_s']:.0f}" for r in ok)
    train = " / ".join(f"{r['times']['train_s']:.0f}" for r in ok)
    val = " / ".join(f"{r['times']['validate_s']:.0f}" for r in ok)
    meets = "yes" if ok and len(ok) == len(runs) and min(acc) >= TARGET else "**no**"
    under = "yes" if ok and max(r["wall_s"] for r in ok) < 300 else "**no**"
    prev = " / ".join(f"{v:.3f}" for v in previous) if previous else "–"
    return (f"| {name} | {ok[0]['train_images'] if ok else '–'} | {ok[0]['heldout_images'] if ok else '–'} | {seeds} | "
            f"{statistics.mean(acc):.3f} | {min(acc):.3f} | {meets} | {wall} | {train} | {val} | "
            f"{ok[0]['epochs'] if ok else '–'} | {under} | {prev} |")  # fmt: skip


def previous_accuracies(path: Path | None) -> dict[str, list[float]]:
    if path is None:
        return {}
    doc = json.loads(path.read_text())
    sets = doc["sets"] if "sets" in doc else runs_by_set([doc])  # a merged file (this script's) or one run's
    return {name: [r["heldout_accuracy_best"] for r in runs if "error" not in r] for name, runs in sets.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stem", required=True)
    ap.add_argument("--previous", type=Path, default=None)
    ap.add_argument("--previous-label", default="first small-cnn (H200 run 2)", help="the --previous column's title")
    args = ap.parse_args()
    docs = [json.loads(p.read_text()) for p in args.files]
    sets = runs_by_set(docs)
    prev = previous_accuracies(args.previous)
    order = {name: i for i, name in enumerate(DATASETS)}
    lines = ["| data set | training images | held-out n | held-out acc (seed: acc) | mean | worst | ≥ 95 % every seed? "
             f"| wall s per seed | train s | validate s | epochs | < 5 min? | {args.previous_label} |",
             "| --- | ---: | ---: | --- | ---: | ---: | --- | --- | --- | --- | ---: | --- | --- |"]  # fmt: skip
    lines += [line(name, sets[name], prev.get(name)) for name in sorted(sets, key=lambda n: order.get(n, 99))]
    merged = {"sets": sets, "previous": prev, "sources": [str(p) for p in args.files]}
    (args.out / "json").mkdir(parents=True, exist_ok=True)
    (args.out / "json" / f"{args.stem}.json").write_text(json.dumps(merged, indent=2))
    (args.out / f"{args.stem}.table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
