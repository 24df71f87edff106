"""The published H200 error table (benchmarks/plan-error_h200_2026-12-05.md) is what the shipped calibration and
TimingProfile predict: a change to the time or memory model that moves a published prediction fails here, and the
table must be regenerated (benchmarks/scripts/plan_error_table.py) with it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpukit.hardware.specs import get_spec
from gpukit.plan.calibration import find_calibration
from gpukit.plan.compute import estimate_time
from gpukit.plan.memory import PlanSettings, estimate_memory
from gpukit.plan.profiles import TIMING

ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "benchmarks" / "json" / "plan-error_h200_2026-12-05.json"
DOC = json.loads(TABLE.read_text()) if TABLE.is_file() else {"rows": [], "profile": {}}
ROWS: list[dict[str, Any]] = DOC["rows"]


def test_the_table_is_there_and_a_third_is_held_out() -> None:
    assert len(ROWS) >= 30
    held = sum(r["held_out"] for r in ROWS)
    assert held / len(ROWS) >= 1 / 3  # a third at least is kept out of every fit
    clean = [r for r in ROWS if r.get("subset") == "held out, clean"]
    assert len(clean) >= 10 and all(r["held_out"] for r in clean)
    assert DOC["profile"] == {k: pytest.approx(v) for k, v in TIMING.__dict__.items()}  # fitted = shipped


def test_the_shipped_h200_calibration_is_the_measured_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # no user file in the way
    cal = find_calibration(get_spec("h200-sxm"))
    assert cal.measured and "shipped" in cal.source and cal.gpu_name == "NVIDIA H200"
    raw = json.loads((ROOT / "benchmarks" / "json" / "plan-error_h200_2026-12-01_calibration.json").read_text())
    assert cal.gemm["bf16"] == sorted((f, r) for f, r in raw["gemm"]["bf16"])


@pytest.mark.parametrize("row", ROWS, ids=[r["config"] for r in ROWS])
def test_published_prediction_is_reproduced(
    row: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    if row.get("image_size"):
        pytest.importorskip("torch")  # --image-size recounts the CNN on torch's meta device
    sys.path.insert(0, str(ROOT / "benchmarks" / "scripts"))
    from plan_error_grid import model_for

    model, s = model_for(row["model"], row.get("image_size")), PlanSettings(**row["settings"])
    mem = estimate_memory(model, s)
    est = estimate_time(model, s, mem, get_spec("h200-sxm"))
    pred = row["predicted"]
    assert mem.peak_allocated_bytes == pred["pred_alloc"]
    assert (est.step_s if s.task == "train" else est.total_s) == pytest.approx(pred["pred_t"], rel=1e-9)
    assert pred["time_err"] == pytest.approx(pred["pred_t"] / pred["meas_t"] - 1)
