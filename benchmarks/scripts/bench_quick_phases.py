"""Where the time of one `gpukit bench ...` run goes, phase by phase and row by row (issue 24: `bench --quick`).

Runs the CLI in this process with timers wrapped around the engine's stages (the code measured is the code shipped;
only the wrappers are added), then writes a JSON breakdown:

    PYTHONPATH=src python benchmarks/scripts/bench_quick_phases.py OUT.json -- bench --quick --db /tmp/x.db --json

``process``: interpreter start to the CLI's first line (from the wall clock the caller passes in GPUKIT_T0_NS, else
null), imports of the command, the machine fingerprint and versions, the ceilings, the rows, analysis, the history
save and the report. ``rows``: per row, the stages of the harness (cannot_run, estimate and the rest of run_one,
prepare, first call, sampling plan, timed samples, the checks after them, build) and the check and poison totals.
The wrappers cost microseconds per call; the run's own JSON is written by the CLI as usual (stdout).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from typing import Any

T_START = time.perf_counter()
_T0_NS = os.environ.get("GPUKIT_T0_NS")
PRE_S = (time.time_ns() - int(_T0_NS)) / 1e9 if _T0_NS else None  # process start → this line

phases: dict[str, float] = defaultdict(float)
rows: list[dict[str, Any]] = []
_current: dict[str, Any] = {}


def _wrap(module: Any, name: str, key: str, per_row: bool = True) -> None:
    fn = getattr(module, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            dt = time.perf_counter() - t0
            if per_row and _current:
                _current[key] = _current.get(key, 0.0) + dt
            else:
                phases[key] += dt

    setattr(module, name, wrapped)


def _wrap_run_one(module: Any, where: str) -> None:
    fn = module.run_one

    def wrapped(workload: Any, impl: str, size: Any, *args: Any, **kwargs: Any) -> Any:
        global _current
        _current = {"where": where, "workload": workload.name, "impl": impl, "size": size.label}
        t0 = time.perf_counter()
        try:
            r = fn(workload, impl, size, *args, **kwargs)
            _current["status"] = r.status
            _current["samples"] = r.repeats
            _current["stopped_by"] = r.stopped_by
            return r
        finally:
            _current["total_s"] = time.perf_counter() - t0
            rows.append(_current)
            phases[f"rows:{where}"] += _current["total_s"]
            _current = {}

    module.run_one = wrapped


# run_one's stages, one after the other (_check, same_bits, _to_device and poisoned run inside them)
STAGES = ("cannot_run", "prepare", "_first_call", "_sampling_plan", "_timed", "_verify_timed", "_build_result")


def _timed_phase(module: Any, name: str, key: str) -> None:
    _wrap(module, name, key, per_row=False)


def install() -> None:
    from gpukit.bench import ceilings, harness, runner
    from gpukit.bench.backends import base
    from gpukit.cli import bench

    for mod in (harness,):
        for stage in ("cannot_run", "_first_call", "_sampling_plan", "_timed", "_verify_timed", "_build_result",
                      "_check", "same_bits", "_to_device"):  # fmt: skip
            _wrap(mod, stage, stage)
    for mod in (runner, ceilings):
        _wrap(mod, "prepare", "prepare")
    _wrap(base.Backend, "poisoned", "poisoned")
    _wrap_run_one(runner, "rows")
    _wrap_run_one(ceilings, "ceilings")
    _timed_phase(runner, "_fingerprint", "fingerprint")
    _timed_phase(runner, "versions", "versions")
    _timed_phase(ceilings, "measure_ceilings", "ceilings")
    _timed_phase(runner, "analyse", "analyse")
    _timed_phase(bench, "_save", "history save")
    _timed_phase(bench, "_report", "report")
    _timed_phase(bench, "_open_history", "open history")


def main() -> int:
    out_path = sys.argv[1]
    args = sys.argv[sys.argv.index("--") + 1 :]
    t0 = time.perf_counter()
    from gpukit import cli

    install()
    phases["import cli + bench"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    code = cli.main(args)
    phases["cli.main"] = time.perf_counter() - t1
    for r in rows:  # what run_one spent outside the stages: mostly the implementation's estimate_s (calibration)
        r["estimate_and_rest_s"] = r["total_s"] - sum(r.get(k, 0.0) for k in STAGES)
    doc = {"pre_main_s": PRE_S, "script_s": time.perf_counter() - T_START, "phases_s": dict(phases), "rows": rows,
           "argv": args, "exit": code}  # fmt: skip
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
