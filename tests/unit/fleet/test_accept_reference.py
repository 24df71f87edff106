"""The shipped references and DCGM's level-3 gates: which model matches, what each figure is judged by, and the
table `gpukit accept` prints with the gate beside each figure."""

from __future__ import annotations

import pytest

from gpukit.fleet.accept_reference import Reference, dcgm_gate, dcgm_gates, reference_for, references
from gpukit.fleet.record import FIGURES


def test_dcgm_gates_read_from_diag_skus() -> None:
    h200 = next(g for g in dcgm_gates() if g.model == "NVIDIA H200")
    assert (h200.compute_tflops, h200.bandwidth_gbps, h200.pcie_min_width) == (37.5, 2333.0, 16)
    assert "DCGM 4.6.0" in h200.source
    h100 = next(g for g in dcgm_gates() if g.model == "NVIDIA H100 80GB HBM3")
    assert h100.compute_tflops == 29.25 and h100.bandwidth_gbps == pytest.approx(1905000 * 1.048576 / 1000, abs=0.1)


@pytest.mark.parametrize(
    ("figure", "gate", "note"),
    [
        ("gemm_bf16_tflops", 37.5, "SGEMM"),
        ("soak_gemm_tflops", 37.5, "SGEMM"),
        ("hbm_copy_gbps", 2333.0, "memory_bandwidth"),
        ("h2d_pinned_gbps", None, "Gen ≥ 3 x16"),
        ("mem_copy_gbps", None, "no gate"),
    ],
)
def test_each_figure_gets_the_gate_of_the_same_quantity(figure: str, gate: float | None, note: str) -> None:
    got, why = dcgm_gate("NVIDIA H200", figure)
    assert got == gate and note in (why or "")


def test_models_match_exactly() -> None:
    assert dcgm_gate("NVIDIA H200 NVL", "gemm_bf16_tflops")[0] == pytest.approx(32.218)  # not the SXM part's gate
    assert dcgm_gate("NVIDIA A10", "gemm_bf16_tflops") == (None, "DCGM has no entry for this GPU model here")
    assert reference_for("NVIDIA H200 NVL") is None or reference_for("NVIDIA H200 NVL").model.endswith("NVL")
    for ref in references():
        assert ref.source.startswith("benchmarks/") and ref.date and set(ref.figures) <= set(FIGURES)
        assert reference_for(ref.model.upper()) == ref


def test_sigma_comes_from_the_spread_over_the_reference_runs() -> None:
    ref = Reference("X", "benchmarks/x.md", "2026-12-01", {"a": {"value": 1.0, "spread": 0.03078, "runs": 10},
                                                              "b": {"value": 2.0}}, runs=10)  # fmt: skip
    assert ref.sigma("a") == pytest.approx(0.01, rel=1e-3)  # d2(10) = 3.078
    assert ref.sigma("b") is None and ref.value("b") == 2.0 and ref.value("c") is None


def test_the_table_shows_each_figure_with_the_dcgm_gate(run_cli, monkeypatch) -> None:
    from gpukit.fleet import accept as accept_mod
    from gpukit.fleet.record import Acceptance, Figure, GpuAcceptance, Soak, SoakPoint

    def fake_run(settings, **kw):
        f = Figure(761.2, "TFLOP/s", vs_reference=0.99, dcgm_gate=37.5, dcgm_note="DCGM targeted_stress: SGEMM")
        bad = Figure(None, "GB/s", status="failed", reason="check failed: relative error 1")
        soak = Soak(30.0, [SoakPoint(1.0, 700.0), SoakPoint(2.0, 702.0), SoakPoint(3.0, 699.0)], sag=0.002)
        gpu = GpuAcceptance(0, "GPU-1", "NVIDIA H200", figures={"gemm_bf16_tflops": f, "hbm_copy_gbps": bad},
                            soak=soak, verdict="faulty", reasons=["hbm_copy_gbps: check failed"])  # fmt: skip
        return Acceptance("2026-12-01T21:00:00Z", {"name": "n1"}, "cuda", gpus=[gpu], verdict="faulty",
                          reasons=["GPU 0 faulty"], duration_s=70.0)  # fmt: skip

    monkeypatch.setattr(accept_mod, "run_accept", fake_run)
    res = run_cli("accept", "--no-save")
    out = " ".join(res.stdout.split())
    assert res.exit_code == 1
    assert "761.2 TFLOP/s" in out and "│ 37.5 │" in out and "99.0%" in out and "beside gemm_bf16: DCGM" in out
    assert "hbm_copy_gbps failed: check failed: relative error 1" in out and "node verdict: faulty" in out
    assert "699.0 … 702.0 TFLOP/s" in out
