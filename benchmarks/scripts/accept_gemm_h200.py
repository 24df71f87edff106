"""The steady-state GEMM figures of `gpukit accept` (300 calls of warm-up, twenty 100 ms samples), measured ROUNDS
times in one process on GPU 0 through accept's own Measurer, with PAUSE_S seconds idle between rounds (the GPU cools
and clocks back up, as between two acceptance runs). Writes $OUT/gemm_rounds.json.

    OUT=/some/dir python3 benchmarks/scripts/accept_gemm_h200.py      (ROUNDS=5 PAUSE_S=3 BUDGET_S=50)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from gpukit.fleet.accept import discover
from gpukit.fleet.accept_figures import Measurer, cuda_plan, figure_from_row

T0 = time.time()
OUT = Path(os.environ["OUT"])
ROUNDS, PAUSE_S, BUDGET_S = (
    int(os.environ.get("ROUNDS", "5")),
    float(os.environ.get("PAUSE_S", "3")),
    float(os.environ.get("BUDGET_S", "50")),
)


def main() -> int:
    target = discover("cuda")[0]
    plans = [p for p in cuda_plan() if p.workload == "gemm"]
    measurer = Measurer()
    rounds = []
    for i in range(ROUNDS):
        if i and time.time() - T0 + 12 > BUDGET_S:
            break
        one = {}
        for plan in plans:
            row = measurer.measure(plan, target)
            fig = figure_from_row(plan.name, row)
            one[plan.name] = {**fig.to_dict(), "samples_s": row.samples_s, "inner": row.inner}
            print(
                f"round {i + 1} {plan.name}: {fig.status} {fig.value} spread {fig.spread} {fig.telemetry}", flush=True
            )
        rounds.append({"t_s": round(time.time() - T0, 2), "figures": one})
        time.sleep(PAUSE_S)
    doc = {"target": target.__dict__, "plans": [p.__dict__ for p in plans], "rounds": rounds}
    (OUT / "gemm_rounds.json").write_text(json.dumps(doc, default=str) + "\n", encoding="utf-8")
    for name in (p.name for p in plans):
        vals = sorted(r["figures"][name]["value"] for r in rounds if r["figures"][name]["value"])
        if vals:
            print(f"{name}: n {len(vals)} min {vals[0]:.1f} median {vals[len(vals) // 2]:.1f} max {vals[-1]:.1f} "
                  f"max/min-1 {vals[-1] / vals[0] - 1:.2%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
