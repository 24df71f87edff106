"""Comparing results: two runs of the history (`gpukit history compare A B`) and a run against a baseline
(`gpukit bench --baseline RUN_ID|FILE|NAME`, node acceptance).

Rows match on (workload, backend, device, size). Throughput is what is compared (higher is better). A difference
smaller than the run-to-run spread of either side — (max − min) / median of its samples — is called noise.

Baseline file (JSON, ``data/baselines/<name>.json`` ships with gpukit)::

    {"format": "gpukit-baseline", "version": 1, "created_at": "...", "machine": {...}, "versions": {...},
     "gpu": "NVIDIA H200", "command": "gpukit bench ...", "tolerance_pct": 10,
     "results": [{"workload": "vector-add", "backend": "torch-cuda", "device": "cuda", "size": "1GiB:float32",
                  "unit": "gbps", "value": 4333.0, "kernel_median_s": 7.4e-4, "spread": 0.01}, ...]}
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.bench.results import Result, Run
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.history import History

__all__ = [
    "BaselineCheck",
    "Comparison",
    "baseline_from_run",
    "check_baseline",
    "compare_runs",
    "load_baseline",
    "shipped_baselines",
]

BASELINE_FORMAT = "gpukit-baseline"

Key = tuple[str, str, str, str]


def _key(r: Result | dict[str, Any]) -> Key:
    if isinstance(r, Result):
        return (r.workload, r.backend, r.device, r.size)
    return (r["workload"], r["backend"], r["device"], r["size"])


def _spread(r: Result) -> float | None:
    if not r.samples_s or not r.kernel_median_s:
        return None
    return (max(r.samples_s) - min(r.samples_s)) / r.kernel_median_s


@dataclass(frozen=True)
class Comparison:
    workload: str
    backend: str
    device: str
    size: str
    unit: str | None
    a: float | None
    b: float | None
    ratio: float | None  # b / a throughput: > 1 means B is faster
    spread: float | None  # the larger relative spread of the two
    verdict: str  # faster | slower | noise | only in A | only in B | not ok

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_runs(a: Run, b: Run) -> list[Comparison]:
    """Row-by-row comparison of run ``b`` against run ``a``."""
    rows_a = {_key(r): r for r in a.results}
    rows_b = {_key(r): r for r in b.results}
    out = []
    for key in list(rows_a) + [k for k in rows_b if k not in rows_a]:
        ra, rb = rows_a.get(key), rows_b.get(key)
        unit = (ra or rb).throughput_unit if (ra or rb) else None  # type: ignore[union-attr]
        ta = ra.throughput if ra and ra.ok else None
        tb = rb.throughput if rb and rb.ok else None
        ratio = tb / ta if ta and tb else None
        spreads = [s for s in (_spread(ra) if ra else None, _spread(rb) if rb else None) if s is not None]
        spread = max(spreads) if spreads else None
        if ra is None:
            verdict = "only in B"
        elif rb is None:
            verdict = "only in A"
        elif ratio is None:
            verdict = "not ok"
        elif spread is not None and abs(ratio - 1.0) <= spread:
            verdict = "noise"
        else:
            verdict = "faster" if ratio > 1.0 else "slower"
        out.append(Comparison(*key, unit, ta, tb, ratio, spread, verdict))
    return out


# ---- baselines -------------------------------------------------------------------------------------------------


def baseline_from_run(run: Run, command: str | None = None, tolerance_pct: float = 10.0) -> dict[str, Any]:
    """The baseline document for the ok rows of ``run``: its GPU rows when it has any (node acceptance is about the
    GPU, its memory and its link; the host CPU of another node may differ), else every row."""
    has_gpu = any(r.ok and r.device == "cuda" for r in run.results)
    rows = []
    for r in run.results:
        if r.ok and r.throughput is not None and (r.device == "cuda" or not has_gpu):
            rows.append(
                {
                    "workload": r.workload,
                    "backend": r.backend,
                    "device": r.device,
                    "size": r.size,
                    "unit": r.throughput_unit,
                    "value": r.throughput,
                    "kernel_median_s": r.kernel_median_s,
                    "spread": _spread(r),
                }
            )
    return {
        "format": BASELINE_FORMAT,
        "version": 1,
        "created_at": run.started_at,
        "run_id": run.id,
        "gpu": run.ceilings.gpu_name,
        "machine": run.machine,
        "versions": run.versions,
        "command": command,
        "tolerance_pct": tolerance_pct,
        "ceilings": run.ceilings.to_dict(),
        "results": rows,
    }


def shipped_baselines() -> list[str]:
    """Names of the baselines that ship with gpukit (``--baseline NAME``)."""
    folder = resources.files("gpukit.bench").joinpath("data/baselines")
    try:
        return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return []


def load_baseline(ref: str, history: History | None = None) -> dict[str, Any]:
    """``ref`` is a run id of the history (needs ``history``), a JSON file, or the name of a shipped baseline."""
    if ref.isdigit():
        if history is None:
            raise ConfigError(f"baseline run {ref} needs a results history", hint="pass --db PATH")
        return baseline_from_run(Run.from_dict(history.load_run(int(ref))))
    path = Path(ref).expanduser()
    if not path.exists():
        shipped = resources.files("gpukit.bench").joinpath(f"data/baselines/{ref}.json")
        if not shipped.is_file():
            names = ", ".join(shipped_baselines()) or "none"
            raise ConfigError(f"no baseline '{ref}'", hint=f"give a run id, a JSON file, or one of: {names}")
        text = shipped.read_text(encoding="utf-8")
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:  # a folder, no permission, a binary file
            raise ConfigError(f"cannot read baseline '{ref}': {exc}", hint="give a baseline JSON file") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"baseline '{ref}' is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != BASELINE_FORMAT or not isinstance(doc.get("results"), list):
        raise ConfigError(
            f"'{ref}' is not a gpukit baseline", hint="write one with: gpukit bench --write-baseline PATH"
        )
    for i, row in enumerate(doc["results"]):  # check_baseline reads these keys of every row
        if not _valid_row(row):
            raise ConfigError(
                f"baseline '{ref}': results[{i}] lacks workload, backend, device, size or a numeric value",
                hint="write one with: gpukit bench --write-baseline PATH",
            )
    return doc


def _valid_row(row: Any) -> bool:
    if not isinstance(row, dict) or not isinstance(row.get("value"), int | float):
        return False
    return all(isinstance(row.get(k), str) for k in ("workload", "backend", "device", "size"))


@dataclass(frozen=True)
class BaselineCheck:
    workload: str
    backend: str
    device: str
    size: str
    unit: str | None
    expected: float
    measured: float | None
    ratio: float | None  # measured / expected
    ok: bool
    verdict: str  # ok | short | not ok | not run

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_baseline(run: Run, baseline: dict[str, Any], tolerance_pct: float) -> list[BaselineCheck]:
    """Every baseline row that this run measured (or tried to): short when measured < expected × (1 − allowed),
    where allowed is the larger of ``tolerance_pct`` and the baseline row's own run-to-run spread (a difference
    within the noise the baseline itself showed is not a finding).

    A baseline row this run did not attempt is "not run" (not a failure: run fewer workloads, check fewer rows);
    one it attempted but could not measure is "not ok" (a failure: the node lost a backend or runs out of memory).
    """
    rows = {_key(r): r for r in run.results}
    tol = tolerance_pct / 100.0
    checks = []
    for b in baseline["results"]:
        key = _key(b)
        expected = float(b["value"])
        r = rows.get(key)
        if r is None:
            checks.append(BaselineCheck(*key, b.get("unit"), expected, None, None, True, "not run"))
            continue
        measured = r.throughput if r.ok else None
        if measured is None:
            checks.append(BaselineCheck(*key, b.get("unit"), expected, None, None, False, "not ok"))
            continue
        ratio = measured / expected if expected > 0 else math.inf
        allowed = max(tol, float(b.get("spread") or 0.0))
        ok = ratio >= 1.0 - min(allowed, 0.5)  # never wave through a node at half its baseline
        checks.append(BaselineCheck(*key, b.get("unit"), expected, measured, ratio, ok, "ok" if ok else "short"))
    return checks
