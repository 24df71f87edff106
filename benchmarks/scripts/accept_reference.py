"""From the runs `accept_h200.py` wrote (runs.jsonl): each figure's median and run-to-run spread, the reference
gpukit ships for the model, the spread fixture of the simulated-fleet test, and every run judged again against
that reference (the flags a healthy GPU would get once the reference exists).

    python3 benchmarks/scripts/accept_reference.py RUNS.jsonl --source benchmarks/accept_h200_2026-12-01.md \
        --date 2026-12-01 --reference src/gpukit/fleet/data/reference_h200.json \
        --spread tests/fixtures/fleet/h200_spread.json --json benchmarks/json/accept_h200_2026-12-01.json

Medians and spreads are over every run that measured the figure (the default run and the shorter-soak runs alike),
except ``soak_gemm_tflops``: its reference value is the default run's (the 30 s soak an acceptance runs), its spread
the shorter soaks' (the only ones repeated).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median
from typing import Any

from gpukit.fleet.accept_judge import judge_acceptance
from gpukit.fleet.accept_reference import Reference
from gpukit.fleet.record import FIGURES, Acceptance
from gpukit.fleet.stats import Thresholds


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _sig(x: float, digits: int = 6) -> float:
    return float(f"{x:.{digits}g}")


def figures(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per figure: values over the runs, median, min, max, spread (max/min − 1), unit and direction."""
    values: dict[str, list[float]] = {}
    default: dict[str, float] = {}
    for d in docs:
        for name, f in d["gpus"][0]["figures"].items():
            if f.get("status") != "ok":
                continue
            if name == "soak_gemm_tflops" and d["_run"]["label"] == "default":
                default[name] = f["value"]
                continue
            values.setdefault(name, []).append(f["value"])
    out = {}
    for name, vals in values.items():
        spec = FIGURES[name]
        ref = default.get(name, median(vals))
        out[name] = {"value": _sig(ref), "unit": spec.unit, "higher_is_better": spec.higher_is_better,
                     "median": _sig(median(vals)), "min": _sig(min(vals)), "max": _sig(max(vals)),
                     "spread": _sig(max(vals) / min(vals) - 1, 4), "runs": len(vals)}  # fmt: skip
    return out


def rejudge(docs: list[dict[str, Any]], ref: Reference) -> list[dict[str, Any]]:
    """Every run judged again against ``ref``: its verdict and flags."""
    out = []
    for d in docs:
        acc = Acceptance.from_dict({k: v for k, v in d.items() if k != "_run"})
        for g in acc.gpus:
            for f in g.figures.values():
                f.flags = []
        faults = {g.index: [r for r in g.reasons if "sag" not in r and " below " not in r] for g in acc.gpus}
        judge_acceptance(acc, {ref.model: ref}, None, Thresholds(), faults)
        flags = {n: f.flags for g in acc.gpus for n, f in g.figures.items() if f.flags}
        soak = [flag for g in acc.gpus for flag in (g.soak.flags if g.soak else [])]
        out.append({"label": d["_run"]["label"], "verdict": acc.verdict, "flags": flags, "soak_flags": soak,
                    "vs_reference": {n: round(f.vs_reference, 4) for n, f in acc.gpus[0].figures.items()
                                     if f.vs_reference is not None}})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--source", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--reference", type=Path)
    ap.add_argument("--spread", type=Path)
    ap.add_argument("--json", type=Path, help="where to write the runs (compact JSON, one list)")
    a = ap.parse_args(argv)
    docs = [d for d in load(a.runs) if d.get("gpus")]
    model = docs[0]["gpus"][0]["model"]
    figs = figures(docs)
    node = docs[0]["node"]
    ref_doc = {"model": model, "source": a.source, "date": a.date, "runs": len(docs),
               "measured_by": "gpukit accept (benchmarks/scripts/accept_h200.py)",
               "stack": {"driver": node.get("driver"), "cuda": node.get("cuda"), **(node.get("stack") or {})},
               "figures": figs}  # fmt: skip
    ref = Reference(model, a.source, a.date, figs, runs=len(docs))
    judged = rejudge(docs, ref)
    if a.reference:
        a.reference.write_text(json.dumps(ref_doc, indent=2) + "\n", encoding="utf-8")
    if a.spread:
        spread = {"kind": "gpukit-accept-spread", "model": model, "runs": max(f["runs"] for f in figs.values()),
                  "source": a.source, "date": a.date,
                  "figures": {n: {k: f[k] for k in ("unit", "higher_is_better", "median", "spread", "runs")}
                              for n, f in figs.items()}}  # fmt: skip
        a.spread.parent.mkdir(parents=True, exist_ok=True)
        a.spread.write_text(json.dumps(spread, indent=2) + "\n", encoding="utf-8")
    if a.json:
        a.json.write_text(json.dumps(load(a.runs), separators=(",", ":")) + "\n", encoding="utf-8")
    json.dump({"figures": figs, "rejudged": judged}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
