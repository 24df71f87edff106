"""The planner's error table from a plan_error_grid.py run: fit the time model's few constants on the fit set, then
predict every configuration and report the fit set and the held-out third apart.

    PYTHONPATH=src python3 benchmarks/scripts/plan_error_table.py RUN_DIR [--md OUT.md] [--json OUT.json]

RUN_DIR holds what plan_error_grid.py wrote (calibration.json, rows.jsonl, meta.json). The fit reads only rows not
marked held-out and fits one part at a time, each against what measures it (``fit``):
1. ``elementwise_passes``, then ``backward_traffic_scale``: the smallest |median of predicted GPU / measured
   device-busy − 1| over the transformer rows' forward phases, then over their backward phases (the profiler's
   device time: the GPU part alone);
2. ``host_scale``: the median of measured phase time / predicted host time over the transformer phases that are
   clearly host-bound (predicted host > 1.3 × GPU);
3. ``overlap_penalty``: the smallest p90 (+ a quarter of the max) of |step error| over the transformer rows;
4. ``cnn_elementwise_passes`` and ``cnn_overlap_penalty`` together: the smallest median |step error| over the
   CNN rows (their p90 is set by the seed CNN's host floor, which neither moves).
The decode constants are kept. Memory is not fitted here: the memory model's coefficients predate these runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_error_grid

from gpukit.hardware.specs import GpuSpec, get_spec, match_spec
from gpukit.plan.calibration import Calibration, load_calibration
from gpukit.plan.compute import estimate_time
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.profiles import TIMING, TimingProfile

PASSES = [x / 2 for x in range(4, 41)]
PENALTIES = [x / 20 for x in range(0, 21)]
SCALES = [x / 100 for x in range(50, 131, 2)]
CNN_PASSES = [float(x) for x in range(4, 41, 4)]
CNN = ("resnet50", "seed-cnn")
HOST_BOUND = 1.3  # a phase is clearly host-bound where its predicted host time is this many times its GPU time


model_for = functools.lru_cache(maxsize=None)(plan_error_grid.model_for)  # --image-size recounts on meta: once


def load_rows(run: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run / "rows.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if "measured" in r]


SPEC: GpuSpec = get_spec("h200-sxm")  # main() sets the run's own GPU from meta.json


PROBE: str | None = None  # main() sets "before" or "after" with --probe: the row's host probe stands in (probed())


def probed(row: dict[str, Any]) -> dict[str, float] | None:
    """The host floor per phase that plan --probe-host's probe timed for the row (plan_error_grid.py --probe), when
    ``PROBE`` asks for it and it ran."""
    got = (row.get("host_probe") or {}).get(PROBE or "") or {}
    return None if "error" in got or not got else {k: v for k, v in got.items() if k != "wall_s"}


def predict(row: dict[str, Any], cal: Calibration, prof: TimingProfile) -> dict[str, Any]:
    model = model_for(row["model"], row.get("image_size"))
    s = PlanSettings(**row["settings"])
    mem = estimate_memory(model, s)
    est = estimate_time(model, s, mem, SPEC, timing=prof, calibration=cal, host=probed(row))
    m = row["measured"]
    out: dict[str, Any] = {"pred_alloc": mem.peak_allocated_bytes, "meas_alloc": m["peak_allocated_bytes"]}
    out["mem_err"] = mem.peak_allocated_bytes / m["peak_allocated_bytes"] - 1
    if s.task == "train":
        out.update(kind="train", pred_t=est.step_s, meas_t=m["step_s"])
    else:
        out.update(kind="infer", pred_t=est.total_s, meas_t=m["generate_s"], cold_s=m.get("cold_generate_s"))
    out["time_err"] = out["pred_t"] / out["meas_t"] - 1 if out["pred_t"] and out["meas_t"] else None
    out["phases"] = []
    for p in est.phases:
        meas = m.get("phase_s", {}).get(p["name"])
        prof_ph = m.get("profile", {}).get(p["name"], {})
        out["phases"].append({**p, "measured_s": meas, "measured_device_s": prof_ph.get("device_s"),
                              "measured_host_s": prof_ph.get("host_s"),
                              "err": p["total_s"] / meas - 1 if meas else None})  # fmt: skip
    return out


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(0.9 * (len(xs) - 1))))] if xs else float("nan")


def stats(errs: list[float]) -> dict[str, float]:
    a = [abs(e) for e in errs]
    return {"n": len(a), "p50": statistics.median(a) if a else float("nan"), "p90": _p90(a),
            "max": max(a) if a else float("nan")}  # fmt: skip


def _score(rows: list[dict[str, Any]], cal: Calibration, prof: TimingProfile) -> float:
    errs = [abs(predict(r, cal, prof)["time_err"] or 9.0) for r in rows]
    return _p90(errs) + 0.25 * max(errs)


def _median_gpu_error(rows: list[dict[str, Any]], cal: Calibration, prof: TimingProfile, phase: str) -> float:
    """|median of predicted GPU / measured device-busy − 1| over the rows' ``phase`` phases: a median, as the fit
    set's small rows (a GPU busy for a few ms of a host-bound phase) would set a p90."""
    errs = [ph["gpu_s"] / ph["measured_device_s"] - 1 for r in rows for ph in predict(r, cal, prof)["phases"]
            if ph["name"] == phase and ph["measured_device_s"]]  # fmt: skip
    return abs(statistics.median(errs)) if errs else 0.0


def _host_ratios(rows: list[dict[str, Any]], cal: Calibration, prof: TimingProfile) -> list[float]:
    out = []
    for r in rows:
        for ph in predict(r, cal, dataclasses.replace(prof, host_scale=1.0))["phases"]:
            if ph["name"] in ("forward", "backward") and ph["measured_s"] and ph["host_s"] > HOST_BOUND * ph["gpu_s"]:
                out.append(ph["measured_s"] / ph["host_s"])
    return out


def fit(rows: list[dict[str, Any]], cal: Calibration) -> TimingProfile:
    """The staged fit of the module docstring, on the fit rows: held-out rows are dropped here, before anything
    reads them."""
    train = [r for r in rows if not r["held_out"] and r["settings"]["task"] == "train"]
    tf = [r for r in train if r["model"] not in CNN]
    cnn = [r for r in train if r["model"] in CNN]
    prof = TIMING
    if tf:
        best = min(PASSES, key=lambda v: _median_gpu_error(tf, cal, dataclasses.replace(prof, elementwise_passes=v),
                                                           "forward"))  # fmt: skip
        prof = dataclasses.replace(prof, elementwise_passes=best)
        best = min(SCALES, key=lambda v: _median_gpu_error(tf, cal, dataclasses.replace(prof, backward_traffic_scale=v),
                                                           "backward"))  # fmt: skip
        prof = dataclasses.replace(prof, backward_traffic_scale=best)
        ratios = _host_ratios(tf, cal, prof)
        if ratios:
            prof = dataclasses.replace(prof, host_scale=round(statistics.median(ratios), 2))
        best = min(PENALTIES, key=lambda v: _score(tf, cal, dataclasses.replace(prof, overlap_penalty=v)))
        prof = dataclasses.replace(prof, overlap_penalty=best)
    if cnn:
        grid = [(p, q) for p in CNN_PASSES for q in PENALTIES[::5]]

        def median_err(pq: tuple[float, float]) -> float:
            trial = dataclasses.replace(prof, cnn_elementwise_passes=pq[0], cnn_overlap_penalty=pq[1])
            return statistics.median(abs(predict(r, cal, trial)["time_err"] or 9.0) for r in cnn)

        p, q = min(grid, key=median_err)
        prof = dataclasses.replace(prof, cnn_elementwise_passes=p, cnn_overlap_penalty=q)
    return prof


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else (f"{x * 1e3:.1f} ms" if x < 10 else f"{x:.2f} s")


def row_set(row: dict[str, Any]) -> str:
    """The row's set: its ``subset`` when a combined run names one (e.g. "held out, clean"), else fit / held out."""
    return str(row.get("subset") or ("held out" if row["held_out"] else "fit"))


def table(rows: list[dict[str, Any]], preds: list[dict[str, Any]]) -> str:
    head = ("| configuration | set | pred alloc GiB | meas alloc GiB | mem err | pred time | meas time | time err "
            "| bound per phase | phase errors |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|")  # fmt: skip
    lines = [head]
    for r, p in zip(rows, preds, strict=True):
        bounds = ", ".join(f"{ph['name'].replace('decode_token', 'token')}: {ph['bound']}" for ph in p["phases"])
        perr = ", ".join(f"{ph['name'].replace('decode_token', 'token')} {_pct(ph['err'])}" for ph in p["phases"])
        lines.append(
            f"| {r['config']} | {row_set(r)} | {p['pred_alloc'] / 2**30:.2f} | "
            f"{p['meas_alloc'] / 2**30:.2f} | {_pct(p['mem_err'])} | {_ms(p['pred_t'])} | {_ms(p['meas_t'])} | "
            f"{_pct(p['time_err'])} | {bounds} | {perr} |"
        )
    return "\n".join(lines)


def phase_table(rows: list[dict[str, Any]], preds: list[dict[str, Any]]) -> str:
    """Every phase: predicted total / GPU / host against the CUDA events' time and the profiler's device and host."""
    cols = "configuration | phase | bound | pred | meas | err | pred GPU | meas device busy | pred host | meas host"
    lines = [f"| {cols} |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r, p in zip(rows, preds, strict=True):
        for ph in p["phases"]:
            lines.append(
                f"| {r['config']} | {ph['name'].replace('_', ' ')} | {ph['bound']} | {_ms(ph['total_s'])} | "
                f"{_ms(ph['measured_s'])} | {_pct(ph['err'])} | {_ms(ph['gpu_s'])} | {_ms(ph['measured_device_s'])} | "
                f"{_ms(ph['host_s'])} | {_ms(ph['measured_host_s'])} |"
            )
    return "\n".join(lines)


def generate_table(rows: list[dict[str, Any]], preds: list[dict[str, Any]]) -> str:
    lines = ["| configuration | set | warm pred | warm meas | err | first call (cold, measured) |",
             "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for r, p in zip(rows, preds, strict=True):
        if p["kind"] == "infer":
            lines.append(f"| {r['config']} | {row_set(r)} | {_ms(p['pred_t'])} | "
                         f"{_ms(p['meas_t'])} | {_pct(p['time_err'])} | {_ms(p.get('cold_s'))} |")  # fmt: skip
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]], preds: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    names = dict.fromkeys([row_set(r) for r in rows if r["held_out"]] + [row_set(r) for r in rows if not r["held_out"]])
    for name in names or ("held out", "fit"):
        sel = [p for r, p in zip(rows, preds, strict=True) if row_set(r) == name]
        out[name.replace(" ", "_")] = {
            "memory": stats([p["mem_err"] for p in sel]),
            "step_time": stats([p["time_err"] for p in sel if p["kind"] == "train" and p["time_err"] is not None]),
            "generate_time": stats([p["time_err"] for p in sel if p["kind"] == "infer" and p["time_err"] is not None]),
        }
    return out


def summary_md(s: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| set | what | n | p50 | p90 | max |", "|---|---|---:|---:|---:|---:|"]
    for name, parts in s.items():
        for what, st in parts.items():
            lines.append(f"| {name.replace('_', ' ')} | {what.replace('_', ' ')} | {st['n']} | {st['p50']:.1%} | "
                         f"{st['p90']:.1%} | {st['max']:.1%} |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-fit", action="store_true", help="predict with the shipped TimingProfile as it is")
    ap.add_argument("--probe", choices=("before", "after"), help="each row's host floor from plan --probe-host's "
                    "probe, timed before or after the row was measured (plan_error_grid.py --probe)")  # fmt: skip
    args = ap.parse_args()
    global SPEC, PROBE
    PROBE = args.probe
    meta = json.loads((args.run / "meta.json").read_text()) if (args.run / "meta.json").is_file() else {}
    SPEC = match_spec(meta.get("device", "")) or SPEC
    cal = load_calibration(args.run / "calibration.json")
    rows = load_rows(args.run)
    prof = TIMING if args.no_fit else fit(rows, cal)
    preds = [predict(r, cal, prof) for r in rows]
    s = summary(rows, preds)
    head = "".join(f"- {k}: `{v}`\n" for k, v in meta.items())
    fitted = ", ".join(f"`{k}` = {v:.3g}" for k, v in dataclasses.asdict(prof).items())
    text = (f"{head}\n- fitted on the fit set (none of the held-out rows): {fitted}\n\n{summary_md(s)}\n\n"
            f"{table(rows, preds)}\n\n"
            f"### generate(): warm vs first call\n\n{generate_table(rows, preds)}\n\n"
            f"### per phase\n\n{phase_table(rows, preds)}\n")  # fmt: skip
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        doc = {"profile": dataclasses.asdict(prof), "summary": s,
               "rows": [{**r, "predicted": p} for r, p in zip(rows, preds, strict=True)]}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
