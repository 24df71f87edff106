"""``--engine`` on a CUDA GPU: compile (max-autotune kernels, the runner's own CUDA graph per padded size) in bf16
passes the accuracy gate against fp32 eager, gives eager's labels through the serving path, and ``auto`` times both
and keeps the faster one that passed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from gpukit.serve.choose import EngineSpec, build_runner  # noqa: E402
from gpukit.serve.engines import compile_unavailable  # noqa: E402

if compile_unavailable(True):
    pytest.skip(f"compile: {compile_unavailable(True)}", allow_module_level=True)


def test_compile_bf16_passes_the_gate_and_replays_graphs(ckpt: Path) -> None:
    runner, choice = build_runner(EngineSpec(ckpt, "cuda", "compile", "bf16", max_batch=16))
    assert choice.engine == "compile" and choice.precision == "bf16" and choice.gate and choice.gate.passed
    assert runner.graphs and sorted(runner.graphs) == runner.buckets == runner.warmed  # captured, warmed
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (3, 64, 64), dtype=np.uint8) for _ in range(11)]
    got, _ = runner.run_items(list(images))
    eager, _ = build_runner(EngineSpec(ckpt, "cuda", "eager", "bf16", max_batch=16))[0].run_items(list(images))
    assert float(np.abs(got - eager).max()) < 0.02


def test_auto_times_both_and_keeps_a_passing_engine(ckpt: Path) -> None:
    _, choice = build_runner(EngineSpec(ckpt, "cuda", "auto", "bf16", max_batch=16, cache=False))
    names = {c.engine for c in choice.candidates if c.error is None}
    assert {"eager", "compile"} <= names and choice.engine in names
    assert all(c.images_per_s and c.images_per_s > 0 for c in choice.candidates if c.error is None)
    assert choice.gate is not None and choice.gate.passed
