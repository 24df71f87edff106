"""Summarise a multigpu_run.sh folder as Markdown: gpukit's all-reduce busbw beside nccl-tests' (when its output is
there), P2P, DDP scaling, and plan's predicted 2-GPU step (with communication) beside the measured 2-rank step.

    python3 benchmarks/scripts/multigpu_compare.py WORK_DIR > summary.md

Reads WORK_DIR/{allreduce.json, p2p.json, scaling.json, plan2.json, nccl_tests.txt}; any missing piece is said so.
nccl-tests' table: the out-of-place busbw column (its 8th field: size count type redop root time algbw busbw …).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def nccl_tests_busbw(text: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].isdigit() and f[2] in ("float", "bfloat16", "half"):
            try:
                out[int(f[0])] = float(f[7])
            except ValueError:
                continue
    return out


def allreduce_section(work: Path) -> list[str]:
    doc = _load(work / "allreduce.json")
    if not doc:
        return ["_no allreduce.json_"]
    theirs = nccl_tests_busbw((work / "nccl_tests.txt").read_text()) if (work / "nccl_tests.txt").exists() else {}
    best: dict[int, dict[str, float]] = {}
    for r in doc["rows"]:
        if r["status"] == "ok" and r["dtype"] == "fp32" and r["busbw_gbps"] is not None:
            best.setdefault(r["size_bytes"], {})[r["graph"]] = r["busbw_gbps"]
    lines = [f"ranks: {doc['settings'].get('ranks')}; nccl-tests: {'present' if theirs else 'not run'}", "",
             "| size | gpukit per-call GB/s | gpukit captured GB/s | nccl-tests GB/s | best / nccl-tests |",
             "|---|---|---|---|---|"]  # fmt: skip
    for size in sorted(best):
        pc, cap = best[size].get("per-call"), best[size].get("captured")
        ref = theirs.get(size)
        top = max(v for v in (pc, cap) if v is not None)
        ratio = f"{top / ref:.1%}" if ref else "n/a"
        cells = [f"{v:.1f}" if v is not None else "n/a" for v in (pc, cap, ref)]
        lines.append(f"| {size} | {' | '.join(cells)} | {ratio} |")
    failed = [r for r in doc["rows"] if r["status"] != "ok"]
    lines += [f"- {r['op']} {r['dtype']} {r['size_bytes']} {r['graph']}: {r['status']}: {r['reason']}" for r in failed]
    return lines


def scaling_section(work: Path) -> list[str]:
    doc = _load(work / "scaling.json")
    if not doc:
        return ["_no scaling.json_"]
    lines = ["| model | ranks | images/s | efficiency | step median s | status |", "|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        eff = f"{r['efficiency']:.1%}" if r.get("efficiency") else "n/a"
        step = r["step_s"]["median"] if r.get("step_s") else None
        ips = f"{r['images_per_s']:.0f}" if r.get("images_per_s") else "n/a"
        status = f"{r['status']} {r.get('reason') or ''}".strip()
        lines.append(f"| {r['model']} | {r['ranks']} | {ips} | {eff} | {step} | {status} |")
    return lines


def plan_section(work: Path) -> list[str]:
    plan, scaling = _load(work / "plan2.json"), _load(work / "scaling.json")
    if not plan:
        return ["_no plan2.json_"]
    c = plan.get("communication") or {}
    measured = next((r["step_s"]["median"] for r in (scaling or {}).get("rows", [])
                     if r["ranks"] == 2 and r.get("step_s")), None)  # fmt: skip
    pred = c.get("step_no_overlap_s")
    lines = [f"busbw used: {c.get('busbw_source')}",
             f"predicted step: compute {plan['time']['step_s']}, communication {c.get('comm_s')} s, "
             f"no overlap {pred}, full overlap {c.get('step_overlap_s')}",
             f"measured 2-rank step (bench scaling): {measured}"]  # fmt: skip
    if pred and measured:
        lines.append(f"predicted (no overlap) / measured: {pred / measured:.2f}")
    return lines


def main(argv: list[str]) -> int:
    work = Path(argv[0])
    p2p = _load(work / "p2p.json") or {"rows": []}
    out = ["## all-reduce busbw (fp32), gpukit beside nccl-tests", "", *allreduce_section(work), "",
           "## P2P (one way, peer access on)", ""]  # fmt: skip
    out += [f"- {r['src']} → {r['dst']} ({r.get('link')}): {r.get('gbps')} GB/s {r['status']}"
            for r in p2p["rows"] if r["mode"] == "one-way" and r["peer_access"] == "on"]  # fmt: skip
    out += ["", "## DDP scaling", "", *scaling_section(work), "", "## plan, 2 GPUs, with communication", ""]
    out += plan_section(work)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
