"""The planner's measured time accuracy, shipped with gpukit (``src/gpukit/plan/data/time_accuracy.json``), from the
published error table, so that `gpukit plan` can print beside each time how far such a prediction was off.

    PYTHONPATH=src python3 benchmarks/scripts/plan_time_accuracy.py          # rewrite the shipped file
    PYTHONPATH=src python3 benchmarks/scripts/plan_time_accuracy.py --check  # exit 1 when it is out of date

Two kinds of calibration, each with the configurations that measure it:
- ``shipped``: every held-out row of ``json/plan-error_h200_2026-12-05.json`` (seen and clean), predicted with the
  calibration that ships with gpukit (the rows ran on several H200 hosts, so host speed is in the spread);
- ``calibrated``: the 16 clean held-out rows (``NEW_HELD_OUT_3``) predicted with the calibration that
  ``plan --calibrate`` made on the same machine just before they were measured;
- ``probed``: ``plan --probe-host``, the held-out transformer training rows of
  ``benchmarks/plan-probe_h100_2026-12-05.md`` (four H100 hosts) with the probe timed just before each was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import plan_error_table as pet  # noqa: E402
import plan_probe_summary  # noqa: E402

from gpukit.plan.calibration import load_calibration  # noqa: E402
from gpukit.plan.profiles import TIMING  # noqa: E402

TABLE = "benchmarks/plan-error_h200_2026-12-05.md"
PUBLISHED = ROOT / "benchmarks" / "json" / "plan-error_h200_2026-12-05.json"
CLEAN = ROOT / "benchmarks" / "json" / "plan-error_h200_2026-12-04-new3"
OUT = ROOT / "src" / "gpukit" / "plan" / "data" / "time_accuracy.json"
PROBE_TABLE = "benchmarks/plan-probe_h100_2026-12-05.md"
PROBED = [ROOT / "benchmarks" / "json" / f"plan-probe_h100_2026-12-05-{run}" for run in
          ("a-set3", "a-set6", "b-set6", "b-set5", "c-set6", "d-set7")]  # fmt: skip


def _stats(errors: list[float]) -> dict[str, float]:
    s = pet.stats(errors)
    return {"n": int(s["n"]), **{k: round(float(s[k]), 4) for k in ("p50", "p90", "max")}}


def _by_task(preds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    return {
        "train": _stats([p["time_err"] for p in preds if p["kind"] == "train" and p["time_err"] is not None]),
        "infer": _stats([p["time_err"] for p in preds if p["kind"] == "infer" and p["time_err"] is not None]),
    }


def build() -> dict[str, Any]:
    published = json.loads(PUBLISHED.read_text())
    held = [r["predicted"] for r in published["rows"] if r["held_out"]]
    rows = [json.loads(line) for line in Path(f"{CLEAN}_rows.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "measured" in r]
    cal = load_calibration(Path(f"{CLEAN}_calibration.json"))
    own = [pet.predict(r, cal, TIMING) for r in rows]
    return {
        "gpu": "NVIDIA H200",
        "gpu_key": "h200-sxm",
        "table": TABLE,
        "what": "|predicted / measured - 1| of step time (train) and warm generate() time (infer), held-out rows",
        "shipped": _by_task(held),
        "calibrated": _by_task(own),
        "probed": _probed(),
    }


def _probed() -> dict[str, Any]:
    errs = [e for run in PROBED for _, kind, way, e in plan_probe_summary.errors(str(run))
            if kind == "transformer training" and way == "probe before"]  # fmt: skip
    hosts = {run.name.rsplit("-", 2)[-2] for run in PROBED}  # …-2026-12-05-<host>-<set>
    return {"gpu": "NVIDIA H100 80GB HBM3", "hosts": len(hosts), "table": PROBE_TABLE, "train": _stats(errs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    doc = build()
    if ap.parse_args().check:
        same = OUT.is_file() and json.loads(OUT.read_text()) == doc
        print("up to date" if same else f"{OUT} is out of date: run this script without --check")
        return 0 if same else 1
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
