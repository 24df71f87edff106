"""Validate the planner's knobs on a GPU: --optimizer-impl (foreach / fused / for-loop AdamW), --optimizer adam, and
--image-size for the CNN presets. Predicted vs measured peak memory (and step time) per configuration.

Run on a CUDA machine (the H200) from the repository root, in well under 6 minutes:

    PYTHONPATH=src python3 benchmarks/scripts/plan_knobs_h200.py --out "$OUT"

Needs torch with CUDA, transformers (the Qwen2/GPT-2 rows build the model from its config: no hub download) and
torchvision (ResNet-50); a row whose library is missing is reported as an error and the others still run. Each row
goes through plan_grid.run_one (the same predict → measure → compare path as the validation grid), then two rows are
run again through the real CLI, ``gpukit plan … --measure --json``, to show the flags are wired end to end.
Writes $OUT/plan_knobs.json (with per-phase peaks: which phase set the peak) and $OUT/plan_knobs.md; pass = memory
within ±10 % (time within ±35 %, reported, as in the grid).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_grid

from gpukit.plan.cnn_count import at_image_size
from gpukit.plan.models import load_model

TRAIN = "train"
# (preset, settings, image size or None). The Qwen2-0.5B rows at batch 8 × 512 are the issue's: bf16 +
# checkpointing, where --measure read 11.15 GiB with foreach. The planner says the loss's logits set that peak (so
# the three implementations should read about the same); the short-sequence rows (b1 × 128, GPT-2 b2 × 256) are
# optimizer-step bound, where fused should read one moment's size (2 or 4 bytes/param) less than foreach.
KNOBS: list[tuple[str, dict[str, Any], int | None]] = [
    *[
        ("qwen2-0.5b", dict(task=TRAIN, recipe="bf16", batch=8, seq=512, checkpointing=True, optimizer_impl=i), None)
        for i in ("foreach", "fused", "for-loop")
    ],
    *[
        ("qwen2-0.5b", dict(task=TRAIN, recipe="bf16", batch=1, seq=128, checkpointing=True, optimizer_impl=i), None)
        for i in ("foreach", "fused", "for-loop")
    ],
    *[
        ("gpt2", dict(task=TRAIN, recipe="amp-bf16", batch=2, seq=256, optimizer_impl=i), None)
        for i in ("foreach", "fused")
    ],
    ("gpt2", dict(task=TRAIN, recipe="amp-bf16", batch=2, seq=256, optimizer="adam", optimizer_impl="fused"), None),
    *[("resnet50", dict(task=TRAIN, recipe="amp-bf16", batch=64), n) for n in (160, 224, 288, 384)],
    *[("seed-cnn", dict(task=TRAIN, recipe="fp32", batch=256), n) for n in (160, 224, 288)],
]
# The same knobs through the CLI (`plan --measure`), one transformer and one CNN row.
CLI_ROWS = [
    ["qwen2-0.5b", "--recipe", "bf16", "--batch", "1", "--seq", "128", "--checkpointing", "--optimizer-impl", "fused"],
    ["resnet50", "--recipe", "amp-bf16", "--batch", "64", "--image-size", "160"],
]


def label(name: str, kw: dict[str, Any], image: int | None) -> str:
    base = plan_grid._label(name, kw)
    opt = kw.get("optimizer", "adamw")
    extra = f" {opt} {kw.get('optimizer_impl', 'foreach')}" if name not in ("resnet50", "seed-cnn") else ""
    return base + extra + (f" @{image}px" if image else "")


def peak_phase(row: dict[str, Any]) -> str:
    phases = row.get("measured", {}).get("phases", {})
    peaks = {
        k.removesuffix("_peak_allocated_bytes"): v for k, v in phases.items() if k.endswith("_peak_allocated_bytes")
    }
    return max(peaks, key=lambda k: peaks[k]) if peaks else "n/a"


def predicted_phase(row: dict[str, Any]) -> str:
    notes = " ".join(row.get("predicted", {}).get("notes", []))
    if "optimizer step" in notes:
        return "step"
    if "end of backward" in notes:
        return "backward end"
    return "backward start" if "start of backward" in notes else "n/a"


def run_rows(db: Path) -> list[dict[str, Any]]:
    rows = []
    for name, kw, image in KNOBS:
        lab = label(name, kw, image)
        t0 = time.perf_counter()
        try:
            model = at_image_size(load_model(name), image) if image else None
            row = plan_grid.run_one(name, kw, db, model=model, label=lab)
            row["peak_phase"], row["predicted_phase"] = peak_phase(row), predicted_phase(row)
        except Exception as exc:  # one failing configuration must not lose the others
            row = {"config": lab, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        row["wall_s"] = time.perf_counter() - t0
        row["new_held_out"] = True  # none of these was among the configurations the profiles were fitted on
        rows.append(row)
        done = row.get("error") or f"mem {plan_grid._pct(row['mem_err'])} time {plan_grid._pct(row['time_err'])}"
        print(f"{lab}: {done} ({row['wall_s']:.1f} s)", flush=True)
    return rows


def run_cli_rows(db: Path) -> list[dict[str, Any]]:
    out = []
    env = {**os.environ, "PYTHONPATH": "src" + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for args in CLI_ROWS:
        cmd = [sys.executable, "-m", "gpukit", "plan", *args, "--measure", "--json", "--db", str(db)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
        row: dict[str, Any] = {
            "command": " ".join(["gpukit", "plan", *args, "--measure", "--json"]),
            "rc": proc.returncode,
        }
        if proc.returncode == 0:
            doc = json.loads(proc.stdout)
            row.update(settings=doc["settings"], model=doc["model"], comparison=doc["measurement"]["rows"])
        else:
            row["stderr"] = proc.stderr[-2000:]
        out.append(row)
        print(f"CLI {row['command']}: rc {proc.returncode}", flush=True)
    return out


def markdown(rows: list[dict[str, Any]], cli: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# plan knobs — {meta['device']}, {meta['date_utc']} UTC", ""]
    lines += [f"- {k}: `{v}`" for k, v in meta.items()] + ["", plan_grid.table(rows), ""]
    lines += [
        "| configuration | predicted peak phase | measured peak phase | fwd / bwd / step peak GiB |",
        "|---|---|---|---|",
    ]
    for r in rows:
        ph = r.get("measured", {}).get("phases", {})
        peaks = " / ".join(plan_grid._gib(ph.get(f"{p}_peak_allocated_bytes")) for p in ("forward", "backward", "step"))
        lines.append(f"| {r['config']} | {r.get('predicted_phase', 'n/a')} | {r.get('peak_phase', 'n/a')} | {peaks} |")
    lines += ["", "## Through the CLI (`gpukit plan … --measure`)", ""]
    for c in cli:
        lines.append(f"- `{c['command']}` → rc {c['rc']}")
        for what, v in (c.get("comparison") or {}).items():
            lines.append(f"  - {what}: predicted {v['predicted']}, measured {v['measured']} ({v['error']})")
        if c.get("stderr"):
            lines.append(f"  - stderr: `{c['stderr'][-300:]}`")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--no-cli", action="store_true", help="skip the two `gpukit plan --measure` subprocess rows")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available():
        print("error: plan_knobs_h200 needs a CUDA GPU", file=sys.stderr)
        return 1
    db = args.out / "results.db"
    t0 = time.perf_counter()
    rows = run_rows(db)
    cli = [] if args.no_cli else run_cli_rows(db)
    meta: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "command": "PYTHONPATH=src python3 benchmarks/scripts/plan_knobs_h200.py --out $OUT",
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    for lib in ("transformers", "torchvision"):
        try:
            meta[lib] = __import__(lib).__version__
        except ImportError:
            meta[lib] = "not installed"
    (args.out / "plan_knobs.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "cli": cli}, indent=2, default=str)
    )
    md = markdown(rows, cli, meta)
    (args.out / "plan_knobs.md").write_text(md)
    print(md)
    mem_ok = all("error" not in r and abs(r["mem_err"]) <= plan_grid.MEM_TOL for r in rows)
    return 0 if rows and mem_ok and all(c["rc"] == 0 for c in cli) else 1


if __name__ == "__main__":
    sys.exit(main())
