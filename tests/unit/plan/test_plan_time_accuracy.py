"""`gpukit plan` prints beside a time how far such predictions were off when measured (held-out rows of the
published error table), by kind of calibration; the shipped figures are the table's, recomputed here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gpukit.hardware.specs import get_spec
from gpukit.plan.calibration import datasheet_calibration, find_calibration, load_calibration, time_accuracy

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = json.loads((ROOT / "src" / "gpukit" / "plan" / "data" / "time_accuracy.json").read_text())
CLEAN_CAL = ROOT / "benchmarks" / "json" / "plan-error_h200_2026-12-04-new3_calibration.json"


def test_the_shipped_figures_are_the_published_tables() -> None:
    pytest.importorskip("torch")  # two held-out ResNet-50 rows recount the network at their image size
    sys.path.insert(0, str(ROOT / "benchmarks" / "scripts"))
    import plan_time_accuracy

    assert plan_time_accuracy.build() == SHIPPED
    # what the published error table says (benchmarks/plan-error_h200_2026-12-05.md)
    assert SHIPPED["calibrated"]["train"] == {"n": 14, "p50": 0.1039, "p90": 0.3096, "max": 0.3201}
    assert SHIPPED["shipped"]["train"]["n"] == 50 and SHIPPED["shipped"]["infer"]["n"] == 8
    # benchmarks/plan-probe_h100_2026-12-05.md: 46 transformer training rows (hosts A-D), the probe timed before each
    assert SHIPPED["probed"]["train"] == {"n": 46, "p50": 0.0798, "p90": 0.1982, "max": 0.4492}
    assert SHIPPED["probed"]["hosts"] == 4 and "infer" not in SHIPPED["probed"]


def test_a_probed_time_gets_the_probes_figures() -> None:
    h200 = find_calibration(get_spec("h200-sxm"))
    a = time_accuracy(h200, "h200-sxm", "train", probed=True)
    assert a["probed"] is True and a["n"] == 46 and a["gpu"] == "NVIDIA H100 80GB HBM3" and a["hosts"] == 4
    assert "probed" not in time_accuracy(h200, "h200-sxm", "train")
    assert "probed" not in time_accuracy(h200, "h200-sxm", "infer", probed=True)  # never measured: not claimed


def test_each_kind_of_calibration_gets_its_own_figures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # no user file in the way
    h200 = find_calibration(get_spec("h200-sxm"))
    a = time_accuracy(h200, "h200-sxm", "train")
    assert a["calibration"] == "shipped" and a["n"] == 50 and a["p90"] == SHIPPED["shipped"]["train"]["p90"]
    assert a["with_calibration"] == SHIPPED["calibrated"]["train"]
    own = time_accuracy(load_calibration(CLEAN_CAL), "h200-sxm", "infer")
    assert own["calibration"] == "calibrated" and own["n"] == 2 and "with_calibration" not in own
    a100 = time_accuracy(datasheet_calibration(get_spec("a100-80gb")), "a100-80gb", "train")
    assert a100["calibration"] == "datasheet" and a100["n"] == 0 and a100["reference"] == SHIPPED["shipped"]["train"]
    elsewhere = time_accuracy(load_calibration(CLEAN_CAL), "b200-sxm", "train")  # measured on the H200 only
    assert elsewhere["n"] == 0 and elsewhere["reference"]["n"] == 14


def test_the_cli_prints_and_returns_it(run_cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "400")
    r = run_cli("plan", "gpt2", "--batch", "2", "--seq", "256", "--gpu", "h200-sxm")
    assert r.exit_code == 0, r.stderr
    s = SHIPPED["shipped"]["train"]
    text = " ".join(r.stdout.split())
    assert (
        f"measured accuracy: step time was off by {s['p50']:.0%} at the median, {s['p90']:.0%} at p90 and "
        f"{s['max']:.0%} at worst on 50 held-out one-GPU NVIDIA H200 configurations" in text
    )
    t = json.loads(run_cli("plan", "gpt2", "--gpu", "a100-80gb", "--json").stdout)["time"]
    assert t["accuracy"]["calibration"] == "datasheet" and t["accuracy"]["n"] == 0
    r = run_cli("plan", "gpt2", "--gpu", "a100-80gb")
    assert "measured accuracy: none for this GPU with datasheet rates" in " ".join(r.stdout.split())
