"""cnn-train and mlp-train: the seed models from train/models.py, a checked first-step gradient, real training."""

from __future__ import annotations

import numpy as np
import pytest

from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.workloads import _training, cnn_train, mlp_train
from gpukit.errors import ConfigError

torch = pytest.importorskip("torch")

FAST = Settings(repeats=3, warmup=1, budget_s=5.0, target_sample_s=1e-4)
CNN, MLP = cnn_train.WORKLOAD, mlp_train.WORKLOAD


def test_sizes_counts_and_the_model_is_the_seed_one():
    s = CNN.parse_size("32:bf16")
    assert (s.label, s["batch"], s["dtype"]) == ("32:bf16", 32, "bf16")
    assert CNN.parse_size("8").label == "8:fp32"
    for bad in ("x", "32:fp16", "0"):
        with pytest.raises(ConfigError):
            CNN.parse_size(bad)
    # seed CNN at 64×64: conv 6.64 M + dense 7.87 M + 256 FLOP forward per image
    assert cnn_train.FORWARD_FLOPS == 2 * 62 * 62 * 32 * 27 + 2 * 30752 * 128 + 256
    assert CNN.flops(s) == 3 * cnn_train.FORWARD_FLOPS * 32
    params = 32 * 27 + 32 + 30752 * 128 + 128 + 128 + 1
    assert CNN.output_spec(s) == ((params,), "float32")
    assert CNN.bytes(s) == 32 * 4 * (3 * 64 * 64 + 1) + 36 * params
    assert [x.label for x in CNN.sizes(False)][:5] == ["1:fp32", "8:fp32", "32:fp32", "128:fp32", "512:fp32"]
    assert "32768:bf16" in [x.label for x in MLP.sizes(False)]
    from gpukit.train.models import seed_cnn

    assert [type(m).__name__ for m in cnn_train._build()] == [type(m).__name__ for m in seed_cnn(64, 2)]


@pytest.mark.parametrize(("workload", "label"), [(CNN, "2:fp32"), (MLP, "16:fp32"), (MLP, "16:bf16")])
def test_cpu_step_is_checked_against_float64_and_timed(workload, label):
    size = workload.parse_size(label)
    r = run_one(workload, "torch-cpu", size, prepare(workload, size, np.random.default_rng(0)), FAST)
    assert r.status == "ok", r.reason
    assert r.check is True and r.error <= _training.TOLERANCE[size["dtype"]]
    if size["dtype"] == "fp32":
        assert r.error < 1e-5  # fp32 against float64: rounding only
    assert r.samples_per_s == pytest.approx(size["batch"] / r.kernel_median_s)
    assert r.tolerance == _training.TOLERANCE[size["dtype"]]


def test_check_rejects_a_wrong_or_unwritten_gradient():
    size = MLP.parse_size("8:fp32")
    rng = np.random.default_rng(0)
    ref = MLP.reference(size, MLP.make_inputs(size, rng))
    other = MLP.reference(size, MLP.make_inputs(size, rng))  # another batch, other weights
    assert MLP.check(ref.astype(np.float32), ref, size)[0]
    assert not MLP.check(other, ref, size)[0]
    half = ref.copy()
    half[: len(ref) // 2] = np.nan
    assert not MLP.check(half, ref, size)[0]
    assert not MLP.check(np.zeros_like(ref), ref, size)[0]


def test_steps_train_and_only_the_first_publishes():
    size = MLP.parse_size("64:fp32")
    host = MLP.make_inputs(size, np.random.default_rng(4))
    prepared = MLP.implementations["torch-cpu"].prepare(host, size)
    model, x, y = prepared["model"], prepared["x"], prepared["y"]

    def loss() -> float:
        with torch.no_grad():
            return float(torch.nn.functional.binary_cross_entropy_with_logits(model(x).reshape(-1), y))

    out = torch.full(MLP.output_spec(size)[0], float("nan"))
    before = loss()
    _training._step(prepared, out, size)
    assert not torch.isnan(out).any()
    out.fill_(float("nan"))
    for _ in range(10):
        _training._step(prepared, out, size)
    assert torch.isnan(out).all()  # timed steps never pay for the copy
    assert loss() < before - 0.02  # Adam on a fixed batch: the loss goes down
