"""`run_accept` end to end on simulated GPUs (rows from a test measurer, a fake NVML): which GPU is called slow or
faulty, against what, and why — peers, the shipped reference, the fleet, a lost GPU, a node that changed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from accept_fakes import AcceptNvml, RowMeasurer, h200s

from gpukit.fleet import accept as accept_mod
from gpukit.fleet.accept import AcceptSettings, run_accept
from gpukit.fleet.accept_figures import Target
from gpukit.fleet.accept_reference import Reference
from gpukit.hardware import _nvml

BASE = {"gemm_bf16_tflops": 760.0, "gemm_fp8_tflops": 1290.0, "hbm_copy_gbps": 4170.0, "hbm_triad_gbps": 4300.0,
        "h2d_pinned_gbps": 55.0, "d2h_pinned_gbps": 55.2, "soak_gemm_tflops": 700.0}  # fmt: skip
REF = Reference("NVIDIA H200", "benchmarks/test.md", "2026-12-01", runs=10,
                figures={k: {"value": v, "spread": 0.01} for k, v in BASE.items()})  # fmt: skip
SETTINGS = AcceptSettings(soak_s=5, node_checks=False, node="node-a")


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[AcceptNvml]:
    fake = AcceptNvml(h200s(4))
    _nvml.use(fake)
    monkeypatch.setattr(accept_mod, "reference_for", lambda model: REF if model == "NVIDIA H200" else None)
    yield fake
    _nvml.reset()


def _targets(n: int) -> list[Target]:
    return [Target(i, i, i, f"GPU-{i:04d}", "NVIDIA H200", f"1324590{i:03d}") for i in range(n)]


def _doc(node: str, values: dict[str, float], n: int = 8, stack: str = "S") -> dict:
    figs = {k: {"value": v, "unit": "x", "status": "ok"} for k, v in values.items()}
    return {"node": {"name": node, "stack_key": stack},
            "gpus": [{"index": i, "model": "NVIDIA H200", "figures": figs} for i in range(n)]}  # fmt: skip


def test_a_gpu_slower_than_its_peers_is_named_and_the_rest_pass(nvml: AcceptNvml) -> None:
    m = RowMeasurer(BASE, rates={(2, "hbm_copy_gbps"): 4170.0 * 0.92})
    acc = run_accept(SETTINGS, measurer=m, targets=_targets(4))
    verdicts = [g.verdict for g in acc.gpus]
    assert verdicts == ["ok", "ok", "slow", "ok"] and acc.verdict == "slow"
    fig = acc.gpus[2].figures["hbm_copy_gbps"]
    assert fig.flags == ["slow_vs_peers"] and fig.vs_node == pytest.approx(0.92, abs=1e-3)
    assert fig.node_median == pytest.approx(4170.0) and fig.vs_reference == pytest.approx(0.92, abs=1e-3)
    assert fig.dcgm_gate == 2333.0 and "memory_bandwidth" in (fig.dcgm_note or "")
    assert acc.gpus[0].figures["gemm_bf16_tflops"].dcgm_gate == 37.5  # DCGM's SGEMM gate, printed beside bf16
    assert any("GPU 2" in r and "hbm_copy_gbps" in r and "node's median" in r for r in acc.reasons)
    assert acc.reference is not None and acc.reference["source"] == "benchmarks/test.md"
    doc = acc.to_dict()
    assert doc["kind"] == "gpukit-accept" and doc["node"]["name"] == "node-a"
    assert len(doc["gpus"][0]["telemetry"]["samples"]) >= 1  # NVML sampled during the run
    assert doc["gpus"][0]["telemetry"]["before"]["power_limit_w"] == 700.0
    assert doc["gpus"][0]["soak"]["trace"] and doc["gpus"][0]["figures"]["soak_gemm_tflops"]["value"] == 700.0


def test_below_the_reference_is_slow_even_when_every_peer_is(nvml: AcceptNvml) -> None:
    slow = {k: v * 0.85 for k, v in BASE.items()}
    acc = run_accept(SETTINGS, measurer=RowMeasurer(slow), targets=_targets(4))
    assert {g.verdict for g in acc.gpus} == {"slow"}
    f = acc.gpus[0].figures["gemm_bf16_tflops"]
    assert f.flags == ["slow_vs_reference"] and f.vs_reference == pytest.approx(0.85)


def test_the_fleet_median_of_the_same_model_and_stack_judges_a_lone_gpu(nvml: AcceptNvml) -> None:
    from gpukit.hardware.identity import node_identity

    stack = node_identity("node-a")["stack_key"]
    faster = {k: v * 1.08 for k, v in BASE.items()}
    records = [_doc(f"n{i}", faster, stack=stack) for i in range(3)]
    records += [_doc("other-stack", BASE, stack="drv1"), _doc("node-a", {k: 1.0 for k in BASE}, stack=stack)]
    m = RowMeasurer(BASE)
    acc = run_accept(SETTINGS, measurer=m, targets=_targets(1), fleet_records=records)
    f = acc.gpus[0].figures["h2d_pinned_gbps"]
    assert acc.node["stack_key"] == stack and stack.startswith("drv570.86.15")  # the fake NVML's driver
    assert f.fleet_median == pytest.approx(55.0 * 1.08) and f.vs_fleet == pytest.approx(1 / 1.08)
    assert "slow_vs_fleet" in f.flags and acc.gpus[0].verdict == "slow"
    assert any("1 GPU(s) on this node: no node median" in r for r in acc.reasons)
    lonely = run_accept(SETTINGS, measurer=RowMeasurer(BASE), targets=_targets(1), fleet_records=[])
    assert lonely.verdict == "ok" and any("no fleet median" in r for r in lonely.reasons)


def test_a_gpu_lost_mid_run_is_faulty_by_name_and_the_others_carry_on(nvml: AcceptNvml) -> None:
    why = "AcceleratorError: CUDA error: unspecified launch failure"
    m = RowMeasurer(BASE, fail={(1, "hbm_copy_gbps"): why})
    orig = m.measure

    def measure(plan, target, settings=None, workload=None):  # the GPU falls off the bus with the failing call
        row = orig(plan, target, settings, workload)
        if row.status == "failed":
            nvml.lost.add(1)
        return row

    m.measure = measure  # type: ignore[method-assign]
    acc = run_accept(SETTINGS, measurer=m, targets=_targets(3))
    g = acc.gpus[1]
    assert g.verdict == "faulty" and acc.verdict == "faulty"
    assert g.figures["hbm_copy_gbps"].status == "failed" and g.figures["hbm_copy_gbps"].value is None
    later = g.figures["d2h_pinned_gbps"]
    assert later.status == "failed" and "stopped answering earlier" in (later.reason or "")
    assert (1, "d2h_pinned_gbps") not in m.calls and (1, "soak_gemm_tflops") not in m.calls
    assert any("stopped answering NVML" in r for r in g.reasons)
    assert any(r.startswith("GPU 1 (GPU-0001) faulty") for r in acc.reasons)
    assert [acc.gpus[i].verdict for i in (0, 2)] == ["ok", "ok"]


def test_a_failed_check_is_faulty_and_damage_seen_by_nvml_too(nvml: AcceptNvml) -> None:
    m = RowMeasurer(BASE, fail={(0, "gemm_bf16_tflops"): "check failed: relative error 0.5 (tolerance 0.01)"})
    orig = m.measure

    def measure(plan, target, settings=None, workload=None):
        if plan.name == "soak_gemm_tflops" and target.index == 2:
            nvml.gpus[2].ecc_uncorrected_volatile = 1  # an uncorrectable error during the soak
        return orig(plan, target, settings, workload)

    m.measure = measure  # type: ignore[method-assign]
    acc = run_accept(SETTINGS, measurer=m, targets=_targets(3))
    assert [g.verdict for g in acc.gpus] == ["faulty", "ok", "faulty"]
    assert "check failed" in acc.gpus[0].reasons[0]
    assert any("uncorrectable ECC" in r for r in acc.gpus[2].reasons)


def test_a_node_whose_gpus_changed_since_its_last_run_is_named(nvml: AcceptNvml) -> None:
    previous = {"name": "node-a", "driver": "570.86.15", "cuda": "12.8",
                "gpus": [{"index": 0, "uuid": "GPU-0000"}, {"index": 1, "uuid": "GPU-dead"}]}  # fmt: skip
    acc = run_accept(SETTINGS, measurer=RowMeasurer(BASE), targets=_targets(2), previous=previous)
    (changed,) = [r for r in acc.reasons if "changed since its last saved run" in r]
    assert "GPU-dead" in changed and "gone" in changed and "new" in changed


def test_bad_settings_are_refused() -> None:
    from gpukit.errors import ConfigError

    with pytest.raises(ConfigError, match="soak-s"):
        AcceptSettings(soak_s=1)
    with pytest.raises(ConfigError, match="device"):
        AcceptSettings(device="tpu")
