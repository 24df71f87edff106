"""How much `plan --calibrate`'s decode host line moves from one run to the next on the same machine: its
``_host_decode`` (whichever gpukit is first on PYTHONPATH) run ``--runs`` times in one process, each run's
(fixed, per layer) seconds per token and per prefill, and the spread per family.

    PYTHONPATH=src python benchmarks/scripts/plan_host_line_noise.py --device cpu --runs 8 --json after.json
    PYTHONPATH=<an older tree>/src python benchmarks/scripts/plan_host_line_noise.py --runs 8 --json before.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import torch
    import transformers

    from gpukit.plan import calibrate

    torch.set_num_threads(args.threads)
    tm = calibrate._Timer(torch, args.device)
    runs = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        lines = calibrate._host_decode(torch, tm, args.device, quick=False)
        runs.append({"seconds": time.perf_counter() - t0, "lines": lines})
    summary = {}
    for family in runs[0]["lines"]:
        per = [r["lines"][family]["token"][1] * 1e3 for r in runs]
        med = statistics.median(per)
        cv = statistics.stdev(per) / med if len(per) > 1 and med else None
        summary[family] = {"token_ms_per_layer": per, "median": med, "min": min(per), "max": max(per),
                           "stdev_over_median": cv}  # fmt: skip
        print(f"{family:6} token ms/layer: median {med:.3f}, min {min(per):.3f}, max {max(per):.3f}, "
              f"stdev/median {cv or 0:.2f}")  # fmt: skip
    print("seconds a run:", ", ".join(f"{r['seconds']:.1f}" for r in runs))
    if args.json:
        meta = {"gpukit": str(Path(calibrate.__file__).resolve()), "torch": torch.__version__,
                "transformers": transformers.__version__, "python": sys.version.split()[0], "device": args.device,
                "threads": torch.get_num_threads()}  # fmt: skip
        args.json.write_text(json.dumps({"meta": meta, "runs": runs, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
