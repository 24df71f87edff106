"""Issue 25: the step and generate() time errors of runs made with ``plan_error_grid.py --probe``, predicted three
ways from the same rows and calibration: the calibration's host floor (what ``gpukit plan`` uses), and the probe of
``plan --probe-host`` timed just before and just after each configuration was measured; and a fourth, what
``plan --probe-host`` does (the probe for a transformer's training step, the calibration elsewhere).

    PYTHONPATH=src python3 benchmarks/scripts/plan_probe_summary.py \
        benchmarks/json/plan-probe_h100_2026-12-05-{a-set3,a-set6,b-set6,b-set5}

Each argument is a run's file prefix (``PREFIX_rows.jsonl``, ``PREFIX_calibration.json``, ``PREFIX_meta.json``) or a run
directory (``rows.jsonl`` …); ``--rows RUN…`` prints every row's error each way instead. Rows are grouped as transformer
training, CNN training (probed at batch 1 by the first version of the probe, dropped since) and generate(); the shipped
TimingProfile predicts every one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_error_table as table

from gpukit.hardware.specs import get_spec, match_spec
from gpukit.plan.calibration import load_calibration
from gpukit.plan.profiles import TIMING

WAYS = {"calibration": None, "probe before": "before", "probe after": "after"}
KINDS = (
    "transformer training",
    "CNN training",
    "generate()",
    "set 6 (clean), training",
    "set 6 (clean), transformer training",
)
CNN = ("resnet50", "seed-cnn")


def _file(run: str, name: str) -> Path:
    d = Path(run)
    return d / name if d.is_dir() else Path(f"{run}_{name}")


def kind(row: dict[str, Any]) -> str:
    if row["settings"]["task"] != "train":
        return "generate()"
    return "CNN training" if row["model"] in CNN else "transformer training"


def row_errors(run: str) -> list[tuple[dict[str, Any], dict[str, float | None]]]:
    """Every measured row of ``run`` with its time error each way (None: that way has no probe for it, or no
    time). plan_error_table's SPEC and PROBE are set for the run and put back after."""
    meta = json.loads(_file(run, "meta.json").read_text())
    cal = load_calibration(_file(run, "calibration.json"))
    rows = [json.loads(x) for x in _file(run, "rows.jsonl").read_text().splitlines() if x.strip()]
    out = []
    spec, probe_was = table.SPEC, table.PROBE
    table.SPEC = match_spec(meta.get("device", "")) or get_spec("h200-sxm")
    try:
        for row in (r for r in rows if "measured" in r):
            errs: dict[str, float | None] = {}
            for way, probe in WAYS.items():
                table.PROBE = probe
                probed = probe is None or table.probed(row)
                errs[way] = table.predict(row, cal, TIMING)["time_err"] if probed else None
            out.append((row, errs))
    finally:
        table.SPEC, table.PROBE = spec, probe_was
    return out


def errors(run: str) -> list[tuple[str, str, str, float]]:
    """(run, kind, way, time error) of every measured row of ``run``, way by way."""
    got = row_errors(run)
    return [(Path(run).name, kind(row), way, errs[way]) for way in WAYS for row, errs in got
            if errs[way] is not None]  # fmt: skip


def per_row(run: str) -> None:
    """``--rows``: every measured row of ``run`` with its time error each way (no probe: "–")."""
    print(f"\n| {Path(run).name}: configuration | " + " | ".join(WAYS) + " |\n|---|" + "---:|" * len(WAYS))
    for row, errs in row_errors(run):
        cells = ["–" if e is None else f"{e:+.1%}" for e in errs.values()]
        print(f"| {row['config']} | " + " | ".join(cells) + " |")


def main(runs: list[str]) -> int:
    if runs and runs[0] == "--rows":
        for run in runs[1:]:
            per_row(run)
        return 0
    got = [e for run in runs for e in errors(run)]
    shipped = {"transformer training": "probe before", "CNN training": "calibration"}  # plan --probe-host's
    got += [(r, k, "plan --probe-host", e) for r, k, w, e in got if shipped.get(k) == w]
    clean = [(r, k, w, e) for r, k, w, e in got if r.endswith("set6") and k != "generate()"]
    got += [(r, "set 6 (clean), training", w, e) for r, _, w, e in clean]
    got += [(r, "set 6 (clean), transformer training", w, e) for r, k, w, e in clean if k == "transformer training"]
    print("| rows | way | n | p50 | p90 | max | within ±15 % |\n|---|---|---:|---:|---:|---:|---:|")
    for k in KINDS:
        for way in (*WAYS, "plan --probe-host"):
            errs = [e for _, kk, w, e in got if kk == k and w == way]
            if errs:
                st = table.stats(errs)
                inside = sum(abs(e) <= 0.15 for e in errs)
                print(f"| {k} | {way} | {st['n']} | {st['p50']:.1%} | {st['p90']:.1%} | {st['max']:.1%} | {inside} |")
    print("\n| run | rows | way | n | p50 | p90 | max |\n|---|---|---|---:|---:|---:|---:|")
    for run in dict.fromkeys(r for r, *_ in got):
        for k in KINDS[:3]:
            for way in WAYS:
                errs = [e for r, kk, w, e in got if r == run and kk == k and w == way]
                if errs:
                    st = table.stats(errs)
                    print(f"| {run} | {k} | {way} | {st['n']} | {st['p50']:.1%} | {st['p90']:.1%} | {st['max']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
