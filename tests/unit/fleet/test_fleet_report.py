"""The fleet report's pieces without a browser: what goes into the heatmap, the notes, the outliers' order."""

from __future__ import annotations

import pytest

import fleet_synthetic as synth
from gpukit.fleet import report
from gpukit.fleet.outliers import describe_telemetry, find_outliers
from gpukit.fleet.status import fleet_status

pytest.importorskip("matplotlib")


def test_node_cells_take_each_nodes_slowest_gpu_and_mark_flags() -> None:
    st = fleet_status(synth.fleet(4, 4, seed=2, slowed={(1, 3): ("hbm_copy_gbps", 0.10)}))
    cells = report._node_cells(st)
    worst, flagged = cells["node-001"]["hbm_copy_gbps"]
    assert worst == pytest.approx(90.0, abs=1.5) and flagged
    assert not cells["node-000"]["hbm_copy_gbps"][1] and cells["node-000"]["hbm_copy_gbps"][0] > 97


def test_a_large_fleet_heatmap_shows_the_slowest_nodes_and_says_so() -> None:
    st = fleet_status(synth.fleet(report.HEATMAP_MAX_NODES + 4, 1, seed=1))
    _, caption = report.heatmap_plot(st)
    assert f"{report.HEATMAP_MAX_NODES} nodes × 7 figures" in caption and "the 4 nodes" in caption


def test_a_healthy_fleet_has_no_soak_plot_and_says_why() -> None:
    built = report.build_fleet_report(fleet_status(synth.fleet(3, 2, seed=1)))
    names = [p.name for p in built.plots]
    assert names[0] == "heatmap" and "soak" not in names
    assert built.notes == {"soak": "no GPU is flagged"}
    page = report.to_html(built)
    assert "no GPU is flagged" in page and "no GPU flagged among 6" in page


def test_outliers_put_failed_checks_first_then_the_slowest() -> None:
    recs = synth.fleet(4, 4, seed=3, slowed={(0, 1): ("gemm_fp8_tflops", 0.06), (2, 0): ("gemm_fp8_tflops", 0.12)})
    recs[3]["gpus"][2]["figures"]["d2h_pinned_gbps"].update(status="failed", value=None, reason="mismatch")
    found = find_outliers(fleet_status(recs))
    assert [(o.node, o.gpu, o.figure) for o in found] == [
        ("node-003", 2, "d2h_pinned_gbps"),
        ("node-002", 0, "gemm_fp8_tflops"),
        ("node-000", 1, "gemm_fp8_tflops"),
    ]
    assert found[0].flags == ["failed"] and found[0].reason == "mismatch"


def test_telemetry_in_words() -> None:
    seen = {"sm_clock_mhz": 1755, "power_w": 690.4, "temp_c": 72, "throttle_reasons": ["hw_thermal_slowdown"]}
    assert describe_telemetry(seen) == "SM 1755 MHz, 690 W, 72 °C, throttle: hw_thermal_slowdown"
    assert describe_telemetry({"throttle_reasons": []}) == "no throttling"
    assert describe_telemetry({}) == "no telemetry"
