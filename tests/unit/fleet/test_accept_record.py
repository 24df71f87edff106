"""The acceptance document round-trips through JSON unchanged, and its verdict order holds."""

from __future__ import annotations

import json

import pytest

from gpukit.fleet.record import (
    FIGURES,
    KIND,
    Acceptance,
    Figure,
    GpuAcceptance,
    Soak,
    SoakPoint,
    worst_verdict,
)


def _doc() -> Acceptance:
    fig = Figure(value=781.2, unit="TFLOP/s", rel_error=0.0021, spread=0.004, reference=790.0, dcgm_gate=741.75,
                 flags=["slow_vs_reference"], telemetry={"sm_clock_mhz": 1980, "throttle_reasons": []})  # fmt: skip
    soak = Soak(duration_s=30.0, trace=[SoakPoint(1.0, 770.1, 1980, 700.0, 60, ["sw_power_cap"])], sag=0.012)
    gpu = GpuAcceptance(index=0, uuid="GPU-1", model="NVIDIA H200", serial="S1",
                        figures={"gemm_bf16_tflops": fig}, soak=soak, verdict="slow", reasons=["r"])  # fmt: skip
    return Acceptance(started_at="2026-12-01T20:00:00Z", node={"name": "n1", "gpus": []}, device="cuda",
                      gpus=[gpu], verdict="slow", reasons=["gpu 0 slow"], duration_s=71.2)  # fmt: skip


def test_round_trip_through_json() -> None:
    doc = _doc()
    data = json.loads(json.dumps(doc.to_dict()))
    assert data["kind"] == KIND and data["version"] == 1
    assert data["gpus"][0]["figures"]["gemm_bf16_tflops"]["value"] == 781.2
    assert data["gpus"][0]["soak"]["trace"][0]["throttle_reasons"] == ["sw_power_cap"]
    back = Acceptance.from_dict(data)
    assert back == doc
    assert back.to_dict() == data


def test_unknown_fields_and_figures_still_read() -> None:
    data = _doc().to_dict()
    data["future_field"] = 1
    data["gpus"][0]["figures"]["gemm_fp4_tflops"] = {"value": 3.0, "unit": "TFLOP/s", "extra": True}
    back = Acceptance.from_dict(data)
    assert back.gpus[0].figures["gemm_fp4_tflops"].value == 3.0


def test_other_kinds_and_newer_versions_refused() -> None:
    data = _doc().to_dict()
    with pytest.raises(ValueError, match="newer"):
        Acceptance.from_dict({**data, "version": 2})
    with pytest.raises(ValueError, match="not a gpukit acceptance"):
        Acceptance.from_dict({**data, "kind": "bench"})


def test_worst_verdict_and_figure_names() -> None:
    assert worst_verdict([]) == "ok"
    assert worst_verdict(["ok", "slow", "ok"]) == "slow"
    assert worst_verdict(["slow", "faulty"]) == "faulty"
    assert worst_verdict(["ok", "weird"]) == "faulty"
    assert {"gemm_bf16_tflops", "hbm_copy_gbps", "d2h_pinned_gbps", "mem_triad_gbps"} <= set(FIGURES)
    assert all(s.name.endswith(("_tflops", "_gbps")) for s in FIGURES.values())
