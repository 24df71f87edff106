"""`plan --calibrate`'s parts on the CPU (host clock): each returns the shape the time model reads, a failing part is
left out with its error kept, and the result survives the file round trip."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpukit.plan import calibrate  # noqa: E402
from gpukit.plan.calibration import load_calibration, save_calibration  # noqa: E402

TM = calibrate._Timer(torch, "cpu")


def test_fit_is_exact_on_a_line_and_never_negative() -> None:
    assert calibrate._fit({1: 3e-3, 4: 9e-3, 8: 17e-3}) == pytest.approx((1e-3, 2e-3))
    assert calibrate._fit({1: 3e-3, 3: 7e-3}) == pytest.approx((1e-3, 2e-3))  # two depths: the line through them
    # slopes 2, 18/7 and 3 ms a layer between the pairs: their median; intercepts 3/7, -9/7 and 3/7 ms: theirs
    assert calibrate._fit({1: 3e-3, 4: 9e-3, 8: 21e-3}) == pytest.approx((3e-3 / 7, 18e-3 / 7))
    assert calibrate._fit({1: 5e-3, 4: 4e-3, 8: 3e-3}) == (pytest.approx(4e-3), 0.0)  # falling: no per-layer cost


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_decode_host_line_from_interleaved_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every depth is timed once a round, in turn; the line is fitted through the per-depth medians."""
    order: list[int] = []
    real_once = TM.once

    def once(fn: Any) -> float:
        order.append(fn.func.__self__.config.num_hidden_layers)  # generate() bound to the tiny model
        return real_once(fn)

    monkeypatch.setattr(TM, "once", once)
    out = calibrate._host_decode(torch, TM, "cpu", quick=True, rounds=2, warm=1)
    assert order == [n for _ in range(3) for n in calibrate.DECODE_DEPTHS for _call in (1, 17)]
    (fixed, per), (p_fixed, p_per) = out["llama"]["token"], out["llama"]["prefill"]
    assert set(out) == {"llama"} and per > 0 and fixed >= 0 and p_per > 0 and p_fixed >= 0


def test_gemm_rates_per_dtype() -> None:
    out = calibrate._gemm(torch, TM, "cpu", [(16, 16, 16), (64, 64, 64)])
    assert set(out) == {"bf16", "fp32"}
    for rows in out.values():
        assert [f for f, _ in rows] == [2.0 * 16**3, 2.0 * 64**3] and all(r > 0 for _, r in rows)


def test_optimizer_rows_per_implementation_and_dtype() -> None:
    out = calibrate._optimizers(torch, TM, "cpu", 1024, few=2, many=6)
    assert set(out) == {"foreach", "fused", "for-loop"}
    for impl in out.values():
        assert set(impl) == {"fp32", "bf16"}
        for row in impl.values():
            assert row["s_per_param"] > 0 and row["fixed_s"] >= 0 and row["s_per_tensor"] >= 0


def test_cnn_host_floor_of_the_seed_cnn() -> None:
    out = calibrate._host_cnn(torch, TM, "cpu", quick=True)
    assert set(out) == {"seed-cnn|fp32"} and out["seed-cnn|fp32"]["forward"] > 0


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_tiny_transformer_step_with_checkpointing() -> None:
    model = calibrate._tiny(torch, "qwen2", 1, torch.float32, "cpu", "reentrant", use_cache=False).train()
    ids = torch.randint(0, 256, (1, 16))
    fwd, bwd = calibrate._train_step(TM, model, ids, contextlib.nullcontext())
    assert fwd > 0 and bwd > 0 and all(p.grad is None for p in model.parameters())  # zeroed for the next step


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers not installed")
def test_training_host_line_from_interleaved_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every depth takes one step a round, in turn; a line per phase through the per-depth medians."""
    order: list[int] = []
    real_step = calibrate._train_step

    def step(tm: Any, model: Any, ids: Any, amp: Any) -> tuple[float, float]:
        order.append(model.config.num_hidden_layers)
        return real_step(tm, model, ids, amp)

    monkeypatch.setattr(calibrate, "_train_step", step)
    out = calibrate._host_train(torch, TM, "cpu", quick=True, rounds=2, warm=1)
    assert order == [n for _ckpt in calibrate.CKPTS[::2] for _ in range(3) for n in calibrate.TRAIN_DEPTHS]
    assert set(out) == {"llama|fp32|none", "llama|fp32|reentrant"}
    for line in out.values():
        assert set(line) == {"forward", "backward"}
        assert all(fixed >= 0 and per > 0 for fixed, per in line.values())  # 8 layers cost more than 1 on any CPU


def test_run_keeps_a_failing_part_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def boom(*_a: Any) -> Any:
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(calibrate, "_attention", boom)
    train = {"llama|fp32|none": {"forward": (1e-3, 2e-4), "backward": (2e-3, 4e-4)}}
    monkeypatch.setattr(calibrate, "_host_train", lambda *a: train)
    monkeypatch.setattr(
        calibrate, "_host_decode", lambda *a: {"llama": {"prefill": (5e-3, 1e-4), "token": (1e-3, 1e-4)}}
    )
    seen: list[str] = []
    cal = calibrate.run_calibration("cpu", quick=True, progress=seen.append)
    assert cal.meta["errors"] == {"attention": "RuntimeError: no such kernel"} and cal.attention_fwd == {}
    assert "optimizer" in seen and cal.bandwidth_gbps > 0 and cal.gemm["fp32"]
    again = load_calibration(save_calibration(cal, tmp_path / "cpu.json"))
    assert again.host == cal.host and again.gemm == cal.gemm and again.meta["errors"] == cal.meta["errors"]
