"""Reads the history written by engine_rerun_h200.sh and writes the figures issue 24 asks for (Markdown + JSON).

    python benchmarks/scripts/engine_rerun_report.py DB [DB ...] WALLS.txt OUT_PREFIX

Runs are grouped by the command they were started with (``settings.command``); the shift runs (the one command
with ``SHIFT_ADD_2`` and ``SHIFT_ADD_5`` beside 1 GiB vector-add and SAXPY, run with GPUKIT_SHIFTED=0 then 1)
alternate unshifted / shifted.

* reruns: consecutive runs of the same command, compared with `gpukit history compare`'s function, with the other
  runs of the command as its history (what `history compare` reads from the store; a and b left out), with no
  history (the samples alone), and with only the runs before the pair (a history that grows run by run, as in CI):
  the share of row pairs that come out SAME, and any SLOWER/FASTER (there must be none on unchanged code);
* shift: each unshifted run against the shifted run that followed it: the share of its shift-add-2 and shift-add-5
  rows that come out SLOWER; its vector-add and SAXPY rows (unchanged between the two) count as big reruns;
* before/after: per row, spread (MAD / median) and samples with a fixed count (``--noise-target 0``, the old way)
  and with noise-based stopping;
* discarded samples over every run; ``--quick`` wall times (WALLS.txt: "label seconds" lines).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from gpukit.bench.baselines import StateDiffers, compare_runs
from gpukit.bench.results import Run
from gpukit.history import open_history


def _runs(db: Path) -> list[Run]:
    with open_history(db, create=False) as h:
        ids = sorted(r.id for r in h.list_runs(10_000))
        return [Run.from_dict(h.load_run(i)) for i in ids]


def _tag(run: Run) -> str:
    command = str(run.settings.get("command") or "")
    if "SHIFT_ADD" in command:
        return "shift"
    if "--noise-target 0" in command:
        return "quick-fixed"
    if "--quick" in command:
        return "quick"
    return "gemm" if " gemm " in f"{command} " else "big"


def _pairs(a: list[Run], b: list[Run], keep: Any = lambda workload: True, others: Any = None) -> dict[str, Any]:
    """Verdicts of the row pairs of runs a[i] → b[i] whose workload ``keep`` accepts; ``others(i)``: the runs whose
    medians give the rows their run-to-run band (none: the samples alone)."""
    verdicts: Counter[str] = Counter()
    refused = 0
    for i, (ra, rb) in enumerate(zip(a, b, strict=False)):
        try:
            rows = compare_runs(ra, rb, others=others(i) if others else ())
        except StateDiffers:
            refused += 1
            continue
        verdicts.update(c.verdict for c in rows if c.verdict in VERDICTS and keep(c.workload))
    n = sum(verdicts.values())
    return {
        "pairs": min(len(a), len(b)),
        "row_pairs": n,
        "refused_pairs": refused,
        "verdicts": dict(verdicts),
        "same_share": verdicts["SAME"] / n if n else None,
        "slower_share": verdicts["SLOWER"] / n if n else None,
    }


VERDICTS = ("SAME", "FASTER", "SLOWER", "UNSURE")


def _merge(*docs: dict[str, Any]) -> dict[str, Any]:
    verdicts = sum((Counter(d["verdicts"]) for d in docs), Counter())
    n = sum(verdicts.values())
    refused = sum(d["refused_pairs"] for d in docs)
    return {"pairs": sum(d["pairs"] for d in docs), "row_pairs": n, "refused_pairs": refused,
            "verdicts": dict(verdicts), "same_share": verdicts["SAME"] / n if n else None,
            "slower_share": verdicts["SLOWER"] / n if n else None}  # fmt: skip


def _spreads(runs: list[Run]) -> dict[str, dict[str, float]]:
    per: dict[str, list[tuple[float, int, bool]]] = defaultdict(list)
    for run in runs:
        for r in run.results:
            if r.ok and r.rel_mad is not None:
                per[f"{r.workload} {r.backend} {r.size}"].append((r.rel_mad, r.repeats, bool(r.settled)))
    return {k: {"rel_mad_median": statistics.median(v[0] for v in vals),
                "samples_median": statistics.median(v[1] for v in vals),
                "settled_share": sum(v[2] for v in vals) / len(vals)} for k, vals in per.items()}  # fmt: skip


def main(dbs: list[Path], walls: Path, prefix: Path) -> None:
    runs = [run for db in dbs for run in _runs(db)]
    by: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by[_tag(run)].append(run)
    doc: dict[str, Any] = {"tags": {k: len(v) for k, v in by.items()}}
    for tag in ("quick", "big", "gemm"):
        group = by.get(tag, [])
        doc[f"reruns_{tag}"] = _pairs(group[:-1], group[1:], others=lambda i, g=group: g)  # the history: all others
        doc[f"reruns_{tag}_samples_alone"] = _pairs(group[:-1], group[1:])
        doc[f"reruns_{tag}_earlier_only"] = _pairs(group[:-1], group[1:], others=lambda i, g=group: g[:i])
    shifted = by.get("shift", [])
    base, moved = shifted[0::2], shifted[1::2]  # unshifted, shifted, unshifted, shifted, ...
    for shift, name in (("0.02", "shift-add-2"), ("0.05", "shift-add-5")):
        keep = lambda w, name=name: w == name  # noqa: E731
        doc[f"shift_{shift}"] = _pairs(base, moved, keep)
        # as CI would judge it: the unshifted runs are the stored history that gives the band
        doc[f"shift_{shift}_with_history"] = _pairs(base, moved, keep, others=lambda i: base)
    # the unshifted runs against each other: reruns of the custom workload at 256 MiB
    doc["reruns_shift_unshifted"] = _pairs(base[:-1], base[1:], others=lambda i: base)
    beside = _pairs(base, moved, lambda w: not w.startswith("shift-add"), others=lambda i: shifted)
    doc["reruns_big_in_shift_pairs"] = beside
    doc["reruns_big"] = _merge(doc["reruns_big"], beside)
    doc["before_after"] = {"fixed": _spreads(by.get("quick-fixed", [])), "noise": _spreads(by.get("quick", []))}
    doc["discarded"] = dict(sum((Counter(r.discarded) for run in runs for r in run.results), Counter()))
    doc["walls_s"] = [line.split() for line in walls.read_text().splitlines() if line.strip()] if walls.exists() else []
    prefix.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str))
    lines = ["# engine rerun figures", ""]
    keys = [f"reruns_{t}{v}" for t in ("quick", "big", "gemm") for v in ("", "_samples_alone", "_earlier_only")]
    shift_keys = ("shift_0.02", "shift_0.02_with_history", "shift_0.05", "shift_0.05_with_history")
    for key in (*keys, "reruns_big_in_shift_pairs", "reruns_shift_unshifted", *shift_keys):
        d = doc[key]
        lines.append(f"- {key}: {d['pairs']} pairs, {d['row_pairs']} row pairs, verdicts {d['verdicts']}, "
                     f"SAME {d['same_share']}, SLOWER {d['slower_share']}, refused {d['refused_pairs']}")  # fmt: skip
    lines += ["", f"- discarded samples: {doc['discarded'] or 'none'}", "", "| row | fixed: MAD/median | samples |"
              " noise-stopped: MAD/median | samples | settled |", "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    fixed, noise = doc["before_after"]["fixed"], doc["before_after"]["noise"]
    for row in sorted(set(fixed) | set(noise)):
        f, n = fixed.get(row, {}), noise.get(row, {})
        lines.append(f"| {row} | {f.get('rel_mad_median', float('nan')):.4f} | {f.get('samples_median', '')} | "
                     f"{n.get('rel_mad_median', float('nan')):.4f} | {n.get('samples_median', '')} | "
                     f"{n.get('settled_share', '')} |")  # fmt: skip
    lines += ["", "wall times (s): " + ", ".join(" ".join(w) for w in doc["walls_s"])]
    prefix.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    *dbs, walls, prefix = (Path(a) for a in sys.argv[1:])
    main(dbs, walls, prefix)
