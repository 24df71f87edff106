"""Run gpukit bench's GPU acceptance on one machine and judge the "done when" criteria of issue 5.

    PYTHONPATH=src python3 examples/gpu_acceptance.py --out "$OUT" --part 1   # ~3 min: quick, 1 GiB, Mandelbrot, seed
    PYTHONPATH=src python3 examples/gpu_acceptance.py --out "$OUT" --part 2   # ~4 min: full run, H200 baseline,
                                                                               # the same node checked against it

Writes JSON, Markdown, the PNG and ``acceptance_part<N>.json`` (each criterion, its figures, pass/fail) into OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GPUKIT = [sys.executable, "-m", "gpukit"]


def bench(out: Path, name: str, *args: str) -> tuple[dict[str, Any], float]:
    """Run `gpukit bench ARGS --json`, keep its JSON, Markdown and stderr; return (document, wall seconds)."""
    cmd = [*GPUKIT, "bench", *args, "--json", "--markdown", str(out / f"{name}.md"), "--db", str(out / "results.db")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    (out / f"{name}.json").write_text(proc.stdout)
    (out / f"{name}.stderr.txt").write_text(proc.stderr)
    print(f"{name}: exit {proc.returncode} in {wall:.1f} s  ({' '.join(cmd[2:])})", flush=True)
    try:
        return json.loads(proc.stdout), wall
    except json.JSONDecodeError:
        return {"results": [], "error": proc.stderr[-2000:]}, wall


def rows(doc: dict[str, Any], workload: str, size: str) -> dict[str, dict[str, Any]]:
    return {r["backend"]: r for r in doc.get("results", []) if r["workload"] == workload and r["size"] == size}


def ratio(rs: dict[str, dict[str, Any]], a: str, b: str, key: str) -> float | None:
    ra, rb = rs.get(a), rs.get(b)
    if not ra or not rb or ra["status"] != "ok" or rb["status"] != "ok":
        return None
    return float(ra[key]) / float(rb[key])


def part1(out: Path) -> dict[str, Any]:
    verdicts: dict[str, Any] = {}
    _, wall = bench(out, "quick", "--quick")
    verdicts["quick <= 60 s"] = {"wall_s": round(wall, 1), "pass": wall <= 60}
    gib, _ = bench(out, "gib", "vector-add", "saxpy", "--size", "1GiB", "--device", "cuda")
    for workload in ("vector-add", "saxpy"):
        rs = rows(gib, workload, "1GiB:float32")
        figures = {
            name: ratio(rs, name, "torch-cuda", "gbps") for name in ("cupy-cuda-c", "triton", "cupy-cuda-c-naive")
        }
        figures["torch-cuda gbps"] = rs.get("torch-cuda", {}).get("gbps")
        ok = all(figures[k] is not None and figures[k] >= 0.95 for k in ("cupy-cuda-c", "triton"))  # type: ignore[operator]
        verdicts[f"{workload} 1GiB: cuda-c and triton >= 95% of torch"] = {"ratios_vs_torch": figures, "pass": ok}
    mandel, _ = bench(out, "mandelbrot_4096", "mandelbrot", "--size", "4096x4096x1000", "--device", "cuda")
    rs = rows(mandel, "mandelbrot", "4096x4096x1000")
    fastest = max(
        (r for n, r in rs.items() if r["status"] == "ok" and n != "numba-cuda-naive"),
        key=lambda r: r["giter_per_s"],
        default=None,
    )
    naive = rs.get("numba-cuda-naive")
    speed = fastest["giter_per_s"] / naive["giter_per_s"] if fastest and naive and naive["status"] == "ok" else None
    verdicts["mandelbrot 4096x4096x1000: fastest GPU >= 1.5x naive numba"] = {
        "fastest": fastest and fastest["backend"],
        "speedup_over_naive": speed,
        "pass": speed is not None and speed >= 1.5,
    }
    seed, _ = bench(out, "mandelbrot_seed", "mandelbrot", "--size", "seed", "--save-image", str(out / "seed.png"))
    rs = rows(seed, "mandelbrot", "1536x1024x20")
    verdicts["seed frame end to end"] = {
        n: {
            k: r.get(k)
            for k in (
                "status",
                "compile_s",
                "h2d_s",
                "kernel_median_s",
                "d2h_s",
                "end_to_end_s",
                "speedup",
                "speedup_e2e",
                "reason",
            )
        }
        for n, r in rs.items()
    }
    example = subprocess.run([*GPUKIT, "bench", "--seed-example", "--no-save"], capture_output=True, text=True)
    (out / "seed_example.txt").write_text(example.stdout + example.stderr)
    verdicts["seed example C = [8..18] everywhere"] = {
        "pass": example.returncode == 0 and "C = [8, 10, 12, 14, 16, 18]" in example.stdout
    }
    return verdicts


def part2(out: Path) -> dict[str, Any]:
    full, wall = bench(out, "full", "--write-baseline", str(out / "h200.json"))
    statuses: dict[str, int] = {}
    for r in full.get("results", []):
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    failed = [
        f"{r['workload']} {r['backend']} {r['size']}: {r['reason']}"
        for r in full.get("results", [])
        if r["status"] == "failed"
    ]
    verdicts: dict[str, Any] = {
        "full run": {"wall_s": round(wall, 1), "statuses": statuses, "failed": failed, "pass": not failed},
        "baseline written": {"path": str(out / "h200.json"), "pass": (out / "h200.json").exists()},
    }
    if (out / "h200.json").exists():
        # The same node against the baseline it just wrote: node acceptance must pass (exit 0).
        again, _ = bench(out, "acceptance", "--device", "cuda", "--baseline", str(out / "h200.json"), "--no-save")
        checks = again.get("baseline", {}).get("checks", [])
        short = [c for c in checks if not c["ok"]]
        verdicts["same node passes its own baseline"] = {"checked": len(checks), "short": short, "pass": not short}
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "out"))
    parser.add_argument("--part", type=int, choices=(1, 2), required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    verdicts = part1(out) if args.part == 1 else part2(out)
    (out / f"acceptance_part{args.part}.json").write_text(json.dumps(verdicts, indent=2, default=str))
    print(json.dumps(verdicts, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
