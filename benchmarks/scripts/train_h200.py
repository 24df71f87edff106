"""`gpukit train` on one H200: throughput at batch 32 and 256, the wall-time split of a 4-epoch run, and
validation (fp32) against `predict` (fp32) — with bf16 autocast shown beside them.

    OUT=/tmp/out PYTHONPATH=src python3 benchmarks/scripts/train_h200.py      (or benchmarks/scripts/train_h200.sh)

1. Generates 20,480 64×64 JPEGs (train_throughput.generate: cats warmer, dogs cooler).
2. Throughput: gpukit's loop exactly as ``train_throughput.py`` measures it (seed CNN, seed recipe, 6 epochs, the
   first left out, median), at batch 32 and 256; compared with the figures of 2026-11-30 (79,974 / 201,561
   img/s): each must be within 5 %.
3. ``python -m gpukit train DATA --model seed-cnn --epochs 4 --min-steps 0 --json`` as a user runs it (a process of
   its own, wall clock taken outside it): the run's split (start-up, decode, setup, capture, train, validate, save);
   the target is wall < 2 × (train + decode).
4. The run's last-epoch validation accuracy against ``gpukit predict`` of its ``last`` checkpoint on the same
   validation images, and the same images evaluated under bf16 autocast, for the record.
Writes ``train-h200.json`` and ``train-h200.md`` under ``$OUT``. About 3 minutes.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_throughput as tt

BASELINE = {"32": 79_974.0, "256": 201_561.0}  # benchmarks/train-throughput_h200_2026-11-30.md
TOLERANCE = 0.05
DEVICE = os.environ.get("TRAIN_H200_DEVICE", "cuda")  # cpu: a dry run of the steps that can run without a GPU


def throughput(root: Path, tmp: Path) -> dict:
    rows = {}
    for batch in (32, 256):
        row = tt.measure(lambda b=batch: tt.gpukit_summary(root, b, 6, tmp / f"tp-{b}"))
        rate = row.get("images_per_s")
        base = BASELINE[str(batch)]
        row["baseline_images_per_s"] = base
        row["ratio_to_baseline"] = rate / base if rate else None
        row["within_5pct"] = bool(rate and rate >= (1 - TOLERANCE) * base)
        rows[str(batch)] = row
        print(f"batch {batch}: {tt.num(rate)} img/s (baseline {base:,.0f})", flush=True)
    return rows


def cli_run(root: Path, out: Path) -> dict:
    cmd = [sys.executable, "-m", "gpukit", "train", str(root), "--model", "seed-cnn", "--epochs", "4", "--min-steps",
           "0", "--device", DEVICE, "--out", str(out), "--json"]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr[-3000:]}
    doc = json.loads(proc.stdout)
    t = doc["times"]
    need = t["train_s"] + t["decode_s"]
    print(f"4-epoch CLI run: wall {wall:.2f} s (inside {t['total_s']:.2f}); split {t}", flush=True)
    return {"command": " ".join(cmd[1:]), "wall_s": wall, "times": t, "train_plus_decode_s": need,
            "wall_over_train_plus_decode": wall / need if need else None,
            "meets_2x": bool(need and wall < 2 * need), "cuda_graphs": doc["cuda_graphs"], "amp": doc["amp"],
            "last_val_accuracy": doc["epochs"][-1]["val_accuracy"], "last_val_loss": doc["epochs"][-1]["val_loss"],
            "val_images": doc["val_images"], "notes": doc["notes"], "warnings": doc["warnings"]}  # fmt: skip


def agreement(root: Path, run: Path, recorded: float | None, recorded_loss: float | None) -> dict:
    import torch

    from gpukit.train import distributed
    from gpukit.train.data import load_folder
    from gpukit.train.evaluate import evaluate
    from gpukit.train.predict import load_model, predict

    data = load_folder(root, 64, 0.2, 0)  # the run's split: same folder, size, fraction and seed
    rows, skipped = predict(run / "last.json", [Path(p) for p in data.val.paths], device=DEVICE)
    classes = sorted({Path(p).parent.name for p in data.val.paths})
    predicted = sum(Path(r.path).parent.name == r.label for r in rows) / len(rows)
    loaded = load_model(run / "last.json", DEVICE)
    dev = torch.device(DEVICE)
    info = distributed.DistInfo(0, 1, 0, DEVICE, None)
    fp32 = evaluate(loaded.net, data.val, dev, info)
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        bf16 = evaluate(loaded.net, data.val, dev, info)
    out = {"classes": classes, "val_images": len(rows), "skipped": len(skipped), "recorded_val_accuracy": recorded,
           "recorded_val_loss": recorded_loss, "predict_fp32_accuracy": predicted,
           "evaluate_fp32_accuracy": fp32.accuracy if fp32 else None, "evaluate_fp32_loss": fp32.loss if fp32 else None,
           "evaluate_bf16_autocast_accuracy": bf16.accuracy if bf16 else None,
           "evaluate_bf16_autocast_loss": bf16.loss if bf16 else None}  # fmt: skip
    out["predict_matches_recorded"] = recorded is not None and abs(predicted - recorded) < 0.5 / len(rows)
    print(f"agreement: {out}", flush=True)
    return out


def markdown(doc: dict) -> str:
    lines = [f"# `gpukit train` on {doc['gpu']} — throughput, wall-time split, validation vs predict", "",
             f"torch {doc['torch']}, Python {doc['python']}, {doc['cpu_cores']} CPU cores. Command: "
             f"`{doc['command']}`.", "", "| batch | img/s | baseline | ratio | within 5 % |",
             "| ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for b, r in doc["throughput"].items():
        lines.append(f"| {b} | {tt.num(r.get('images_per_s'))} | {r['baseline_images_per_s']:,.0f} | "
                     f"{tt.num(r.get('ratio_to_baseline'), '.3f')} | {r['within_5pct']} |")  # fmt: skip
    c = doc["cli"]
    if "error" in c:
        lines += ["", f"4-epoch CLI run failed: `{c['error'][-500:]}`"]
    else:
        t = c["times"]
        lines += ["", f"4-epoch run (`{c['command']}`): wall {c['wall_s']:.2f} s measured outside the process; "
                  f"train + decode {c['train_plus_decode_s']:.2f} s; ratio {c['wall_over_train_plus_decode']:.2f} "
                  f"(target < 2: {c['meets_2x']}).", "", "| part | s |", "| --- | ---: |"]  # fmt: skip
        lines += [f"| {k.removesuffix('_s')} | {v:.3f} |" for k, v in t.items() if v is not None]
    a = doc.get("agreement") or {}
    if a:
        lines += ["", f"Validation vs predict: recorded {a['recorded_val_accuracy']}, predict fp32 "
                  f"{a['predict_fp32_accuracy']}, evaluate fp32 {a['evaluate_fp32_accuracy']}, evaluate under bf16 "
                  f"autocast {a['evaluate_bf16_autocast_accuracy']} (loss fp32 {a['evaluate_fp32_loss']}, bf16 "
                  f"{a['evaluate_bf16_autocast_loss']}); match: {a['predict_matches_recorded']}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: this benchmark needs one", file=sys.stderr)
        return 1
    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="gpukit-train-h200-"))
    root = tmp / "data"
    gen_s = tt.generate(root, 20_480)
    print(f"generated 20,480 JPEGs in {gen_s:.1f} s", flush=True)
    doc: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cpu_cores": os.cpu_count(),
                 "python": platform.python_version(), "command": " ".join(sys.argv)}  # fmt: skip
    doc["cli"] = cli_run(root, tmp / "cli-run")  # first: a fresh process, nothing warmed by this one
    doc["throughput"] = throughput(root, tmp)
    if "error" not in doc["cli"]:
        doc["agreement"] = tt.measure(lambda: agreement(root, tmp / "cli-run", doc["cli"]["last_val_accuracy"],
                                                        doc["cli"]["last_val_loss"]))  # fmt: skip
    (out / "train-h200.json").write_text(json.dumps(doc, indent=2, default=str))
    (out / "train-h200.md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
