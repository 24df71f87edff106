"""Comparing results: two runs of the history (`gpukit history compare A B`) and a run against a baseline
(`gpukit bench --baseline RUN_ID|FILE|NAME`, node acceptance).

Rows match on (workload, backend, device, size). Each pair is classified SAME / FASTER / SLOWER / UNSURE from the
two sides' timed samples by :func:`gpukit.bench.verdict.classify` — the one comparison of gpukit, also used by the
``gpukit_bench`` pytest fixture. Two runs taken in different hardware states (GPU model or serial, driver, clocks,
power limit, persistence or ECC mode, software versions: :func:`gpukit.bench.verdict.state_differences`) are
refused (:class:`StateDiffers`) unless ``force`` is given; then every pair is marked ``state_differs``.

Baseline file (JSON, ``data/baselines/<name>.json`` ships with gpukit)::

    {"format": "gpukit-baseline", "version": 1, "created_at": "...", "machine": {...}, "versions": {...},
     "gpu": "NVIDIA H200", "command": "gpukit bench ...", "tolerance_pct": 10,
     "results": [{"workload": "vector-add", "backend": "torch-cuda", "device": "cuda", "size": "1GiB:float32",
                  "unit": "gbps", "value": 4333.0, "kernel_median_s": 7.4e-4, "spread": 0.01,
                  "stats": {"n": 20, "median_s": 7.4e-4, "q1_s": ..., "q3_s": ..., "ci_low_s": ..., "ci_high_s": ...}},
                 ...]}

A baseline row without ``stats`` (written before they were recorded) is judged by the old rule: short when more than
the tolerance (or its own spread) below the baseline. A row may carry ``"run_to_run": {"band": 0.012, "runs": 9}``:
how much its median moved between unchanged runs of the history it was written from (:func:`run_to_run_bands`);
the comparison then widens its noise band to that.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.bench.results import Result, Run
from gpukit.bench.verdict import (
    RUN_TO_RUN_RUNS,
    RunToRun,
    Spread,
    Verdict,
    classify,
    model_state_differences,
    state_differences,
)
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.history import History

__all__ = [
    "BaselineCheck",
    "Comparison",
    "StateDiffers",
    "baseline_from_run",
    "check_baseline",
    "classify_results",
    "compare_runs",
    "load_baseline",
    "recent_runs",
    "refuse_or_mark",
    "run_to_run_bands",
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


class StateDiffers(ConfigError):
    """Two runs (or a run and its baseline) were taken in different hardware states: their rows are not compared."""


def _state(run: Run | dict[str, Any]) -> dict[str, Any]:
    if isinstance(run, Run):
        return {"machine": run.machine, "versions": run.versions}
    return {"machine": run.get("machine") or {}, "versions": run.get("versions") or {}}


def refuse_or_mark(
    a: Run | dict[str, Any],
    b: Run | dict[str, Any],
    force: bool,
    what: str = "the two runs",
    scope: str = "machine",
) -> list[str]:
    """The hardware-state differences between ``a`` and ``b``; raises :class:`StateDiffers` when there are any
    and ``force`` is not given. ``scope="model"`` (a baseline file: a reference for a GPU model, measured on
    another machine) refuses only the differences of :func:`model_state_differences` and returns the rest to be
    marked."""
    sa, sb = _state(a), _state(b)
    diffs = state_differences(sa, sb)
    refused = model_state_differences(sa, sb) if scope == "model" else diffs
    if refused and not force:
        shown = "; ".join(refused[:6]) + (f"; and {len(refused) - 6} more" if len(refused) > 6 else "")
        raise StateDiffers(
            f"{what} were taken in different hardware states: {shown}",
            hint="compare runs of the same GPU, driver, clocks and versions, or pass --force to compare them anyway "
            "(every row is then marked)",
        )
    return diffs


def classify_results(a: Result, b: Result, run_to_run: RunToRun | None = None) -> Verdict:
    """B against A from their timed samples (rows without samples: UNSURE)."""
    if not a.samples_s or not b.samples_s:
        return Verdict("UNSURE", math.nan, math.nan, "a side has no timed samples")
    va = classify(Spread.from_samples(a.samples_s), Spread.from_samples(b.samples_s), run_to_run)
    return settled_same(va, a, b, run_to_run=run_to_run)


def run_to_run_bands(runs: Iterable[Run], like: Run, skip: Collection[int | None] = ()) -> dict[Key, RunToRun]:
    """Per row, how much its median moved between the ``runs`` taken in ``like``'s hardware state (ids in ``skip``
    left out; the newest last): :class:`~gpukit.bench.verdict.RunToRun`, for rows with enough such runs."""
    state = _state(like)
    medians: dict[Key, list[float]] = {}
    for run in sorted(runs, key=lambda r: r.id or 0):
        if run.id in skip or state_differences(state, _state(run)):
            continue
        for r in run.results:
            if r.ok and r.samples_s:
                medians.setdefault(_key(r), []).append(statistics.median(r.samples_s))
    return {k: band for k, m in medians.items() if (band := RunToRun.from_medians(m)) is not None}


def settled_same(v: Verdict, *rows: Result, run_to_run: RunToRun | None = None) -> Verdict:
    """SAME only between rows that settled: a difference within the noise band of a row that never got down to its
    noise target says the noise was large, not that the two are the same (a 3× difference on a machine whose samples
    spread over 100 % is within the band). With a ``run_to_run`` band the history's own medians measured that noise
    (a GEMM at its power cap never settles within a run, yet its medians move 4 % from run to run): SAME stands."""
    if v.verdict == "SAME" and run_to_run is None and any(r.settled is False for r in rows):
        return Verdict("UNSURE", v.change, v.band, f"{v.why}, but a row never settled (its noise was too large)")
    return v


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
    spread: float | None  # the larger noise band (interquartile range / median) of the two
    verdict: str  # SAME | FASTER | SLOWER | UNSURE | only in A | only in B | skipped in B ... | not comparable ...
    why: str | None = None  # the verdict in words (change, band, intervals)
    state_differs: bool = False  # the runs' hardware states differ (compared with --force)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_runs(a: Run, b: Run, force: bool = False, others: Iterable[Run] = ()) -> list[Comparison]:
    """Row-by-row comparison of run ``b`` against run ``a``, matched on workload, backend, device and size;
    ``others``: more runs of the history, whose medians give each row its run-to-run band (:func:`run_to_run_bands`).

    Raises :class:`StateDiffers` when the runs' hardware states differ, unless ``force``. A workload/backend both
    runs measured, but at sizes the other did not (a ``--quick`` run against a full one), is one row ``not
    comparable: different sizes`` naming them; a row that is not ok on one side says which side and how
    (``skipped in B``), not a bare "not ok"."""
    differs = bool(refuse_or_mark(a, b, force))
    bands = run_to_run_bands(others, a, skip={a.id, b.id})
    rows_a = {_key(r): r for r in a.results}
    rows_b = {_key(r): r for r in b.results}
    out = []
    for key in [k for k in rows_a if k in rows_b]:
        ra, rb = rows_a[key], rows_b[key]
        ta = ra.throughput if ra.ok else None
        tb = rb.throughput if rb.ok else None
        ratio = tb / ta if ta and tb else None
        band: float | None = None
        why: str | None = None
        if not ra.ok and not rb.ok:
            verdict = f"{ra.status} in both" if ra.status == rb.status else f"{ra.status} in A, {rb.status} in B"
        elif not ra.ok:
            verdict = f"{ra.status} in A"
        elif not rb.ok:
            verdict = f"{rb.status} in B"
        else:
            v = classify_results(ra, rb, bands.get(key))
            verdict, why, band = v.verdict, v.why, (v.band if math.isfinite(v.band) else None)
        unit = ra.throughput_unit or rb.throughput_unit
        out.append(Comparison(*key, unit, ta, tb, ratio, band, verdict, why, differs))
    out += _unmatched(rows_a, rows_b)
    return out


def _unmatched(rows_a: dict[Key, Result], rows_b: dict[Key, Result]) -> list[Comparison]:
    """Rows of one run with no row of the same size in the other: grouped per workload/backend/device."""
    only_a = [k for k in rows_a if k not in rows_b]
    only_b = [k for k in rows_b if k not in rows_a]
    groups: dict[tuple[str, str, str], tuple[list[str], list[str]]] = {}
    for side, keys in ((0, only_a), (1, only_b)):
        for k in keys:
            groups.setdefault(k[:3], ([], []))[side].append(k[3])
    out = []
    for (workload, backend, device), (sizes_a, sizes_b) in groups.items():
        unit = (rows_a.get((workload, backend, device, sizes_a[0])) if sizes_a else None) or rows_b.get(
            (workload, backend, device, sizes_b[0] if sizes_b else "")
        )
        u = unit.throughput_unit if unit else None
        if sizes_a and sizes_b:
            size = f"A: {', '.join(sizes_a)}; B: {', '.join(sizes_b)}"
            out.append(Comparison(workload, backend, device, size, u, None, None, None, None,
                                  "not comparable: different sizes"))  # fmt: skip
        else:
            where = "A" if sizes_a else "B"
            out += [Comparison(workload, backend, device, s, u, None, None, None, None, f"only in {where}")
                    for s in sizes_a or sizes_b]  # fmt: skip
    return out


def baseline_from_run(
    run: Run, command: str | None = None, tolerance_pct: float = 10.0, others: Iterable[Run] = ()
) -> dict[str, Any]:
    """The baseline document for the ok rows of ``run``: its GPU rows when it has any (node acceptance is about the
    GPU, its memory and its link; the host CPU of another node may differ), else every row. ``others``: more runs
    of the history, whose medians give each row its ``run_to_run`` band."""
    runs = [*(r for r in others if r.id is None or r.id != run.id), run]  # the history holds ``run`` too
    bands = run_to_run_bands(runs, run)
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
                    "stats": Spread.from_samples(r.samples_s).to_dict() if r.samples_s else None,
                    "run_to_run": asdict(band) if (band := bands.get(_key(r))) else None,
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


def recent_runs(history: History, limit: int = 2 * RUN_TO_RUN_RUNS) -> list[Run]:
    """The newest ``limit`` runs of ``history`` (for run-to-run bands)."""
    return [Run.from_dict(history.load_run(s.id)) for s in history.list_runs(limit)]


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
        run = Run.from_dict(history.load_run(int(ref)))
        return baseline_from_run(run, others=recent_runs(history))
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
    verdict: str  # SAME | FASTER | SLOWER | UNSURE | short | ok (a baseline row without samples) | failed | ...
    why: str | None = None
    state_differs: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_baseline(
    run: Run, baseline: dict[str, Any], tolerance_pct: float, force: bool = False, scope: str = "machine"
) -> list[BaselineCheck]:
    """Every baseline row that this run measured (or tried to), classified by :func:`gpukit.bench.verdict.classify`
    against the baseline row's recorded samples: not ok when SLOWER by more than ``tolerance_pct`` (0: any SLOWER).
    Raises :class:`StateDiffers` when the run's hardware state differs from the baseline's, unless ``force``
    (``scope``: see :func:`refuse_or_mark`).

    A baseline row without recorded samples is judged the old way: short when measured < expected × (1 − allowed),
    allowed the larger of ``tolerance_pct`` and that row's own spread. A baseline row this run did not attempt is
    "not run" (not a failure: run fewer workloads, check fewer rows); one whose backend is not available here is
    "skipped" (the CLI says "nothing to compare" when that is every row); one that ran and failed is "failed".
    """
    differs = bool(refuse_or_mark(baseline, run, force, "this run and its baseline", scope))
    rows = {_key(r): r for r in run.results}
    checks = []
    for b in baseline["results"]:
        key = _key(b)
        expected = float(b["value"])
        r = rows.get(key)
        head = (*key, b.get("unit"), expected)
        if r is None or r.status == "skipped":
            checks.append(BaselineCheck(*head, None, None, True, "not run" if r is None else "skipped"))
            continue
        measured = r.throughput if r.ok else None
        if measured is None:
            checks.append(BaselineCheck(*head, None, None, False, "failed", r.reason, differs))
            continue
        ratio = measured / expected if expected > 0 else math.inf
        verdict, ok, why = _judge(b, r, ratio, tolerance_pct / 100.0)
        checks.append(BaselineCheck(*head, measured, ratio, ok, verdict, why, differs))
    return checks


def _band(row: dict[str, Any]) -> RunToRun | None:
    """A baseline row's recorded run-to-run band (None when it has none)."""
    rr = row.get("run_to_run")
    return RunToRun(float(rr["band"]), int(rr["runs"])) if isinstance(rr, dict) else None


def _judge(b: dict[str, Any], r: Result, ratio: float, tol: float) -> tuple[str, bool, str | None]:
    """(verdict, ok, why) of one measured row against its baseline row."""
    stats = b.get("stats")
    if isinstance(stats, dict) and r.samples_s:
        try:
            band = _band(b)
            v = classify(Spread.from_dict(stats), Spread.from_samples(r.samples_s), band)
            v = settled_same(v, r, run_to_run=band)
        except (KeyError, TypeError, ValueError):
            v = None
        if v is not None:
            ok = v.verdict != "SLOWER" or v.change <= tol
            why = v.why if ok or not tol else f"{v.why}; more than the {tol:.0%} allowed"
            return v.verdict, ok, why
    allowed = max(tol, float(b.get("spread") or 0.0))
    ok = ratio >= 1.0 - min(allowed, 0.5)  # never wave through a node at half its baseline
    return ("ok" if ok else "short"), ok, "the baseline row has no samples: judged by tolerance and spread"
