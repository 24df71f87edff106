"""`gpukit plan --measure` on a real GPU: the prediction must hold (±10 % peak allocated; step time within the
largest error of the H200 table, ±60 % — benchmarks/plan-error_h200_2026-12-01.md — where the GPU has a
calibration), and the per-phase split must add up."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _check(model_name: str, **kw: object) -> None:
    from gpukit.hardware.specs import get_spec, match_spec
    from gpukit.plan.compute import estimate_time
    from gpukit.plan.measure import measure
    from gpukit.plan.memory import PlanSettings, estimate_memory
    from gpukit.plan.models import load_model

    model, s = load_model(model_name), PlanSettings(task="train", **kw)  # type: ignore[arg-type]
    mem = estimate_memory(model, s)
    m = measure(model, s)
    spec = match_spec(m.device_name) or get_spec("h100-sxm")
    t = estimate_time(model, s, mem, spec)
    assert mem.peak_allocated_bytes / m.peak_allocated_bytes == pytest.approx(1.0, abs=0.10)
    assert set(m.phase_s) == {"forward", "backward", "optimizer"} and m.step_s is not None
    assert sum(m.phase_s.values()) == pytest.approx(m.step_s, rel=0.2)
    for name, part in m.profile.items():  # kernels ran, and a phase's busy time fits inside its span
        assert 0 < part["device_s"] <= m.phase_s[name] * 1.5 + part["host_s"], name
    if t.calibrated:  # a measured calibration for this GPU model (shipped for the H200)
        assert t.step_s is not None and t.step_s / m.step_s == pytest.approx(1.0, abs=0.60)


def test_seed_cnn() -> None:
    _check("seed-cnn", recipe="fp32", batch=1024)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_gpt2_bf16() -> None:
    _check("gpt2", recipe="bf16", batch=8, seq=1024)
