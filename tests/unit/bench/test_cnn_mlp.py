"""cnn-train and mlp-train: the seed models from train/models.py, a checked first-step gradient, real training."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.workloads import _training, cnn_train, mlp_train
from gpukit.bench.workloads.base import relative_error
from gpukit.errors import ConfigError

torch = pytest.importorskip("torch")

FAST = Settings(noise_target=0.0, repeats=3, warmup=1, budget_s=5.0, target_sample_s=1e-4)
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


def test_tolerance_is_flat_for_fp32_and_falls_as_one_over_root_batch_for_bf16():
    assert MLP.tolerance(MLP.parse_size("1:fp32")) == MLP.tolerance(MLP.parse_size("8192:fp32")) == 1e-3
    assert MLP.tolerance(MLP.parse_size("1:bf16")) == 0.25
    assert MLP.tolerance(MLP.parse_size("8192:bf16")) == pytest.approx(0.25 / math.sqrt(8192))


@pytest.mark.parametrize(
    ("workload", "label"), [(CNN, "2:fp32"), (MLP, "16:fp32"), (MLP, "16:bf16"), (MLP, "8192:fp32")]
)
def test_cpu_step_is_checked_against_float64_and_timed(workload, label):
    size = workload.parse_size(label)
    r = run_one(workload, "torch-cpu", size, prepare(workload, size, np.random.default_rng(0)), FAST)
    assert r.status == "ok", r.reason
    assert r.check is True and r.error <= r.tolerance == _training.tolerance(size)
    if size["dtype"] == "fp32":
        assert r.error < 1e-6  # fp32 against float64, relative to the summed terms: rounding only
    assert r.samples_per_s == pytest.approx(size["batch"] / r.kernel_median_s)


def _first_step(workload, size, inputs) -> np.ndarray:
    spec = cnn_train.SPEC if workload is CNN else mlp_train.SPEC
    prepared = _training._prepare(spec, "torch-cpu")(inputs, size)
    out = torch.full(workload.output_spec(size)[0], float("nan"))
    _training._step(prepared, out, size)
    return out.numpy()


# Every mlp-train ladder size and the cheap end of cnn-train's (its 512 is checked through the CLI, slow in float64).
LADDER = [(MLP, f"{b}:{dt}") for dt in ("fp32", "bf16") for b in mlp_train.SPEC.ladder]
LADDER += [(CNN, f"{b}:{dt}") for dt in ("fp32", "bf16") for b in (1, 8, 32)]


@pytest.mark.parametrize(("workload", "label"), LADDER)
def test_a_correct_step_passes_at_every_batch_and_a_zero_gradient_fails(workload, label):
    size = workload.parse_size(label)
    inputs = workload.make_inputs(size, np.random.default_rng(1))
    ref = workload.reference(size, inputs)
    ok, err = workload.check(_first_step(workload, size, inputs), ref, size)
    tol = workload.tolerance(size)
    assert ok and err <= tol / 2, (label, err, tol)
    ok, err = workload.check(np.zeros(ref.shape[1], np.float32), ref, size)
    assert not ok and err >= 1.5 * tol, (label, err, tol)


def test_a_cancelling_batch_passes_where_the_error_relative_to_the_result_did_not():
    # Every sample twice, with opposite labels, and logits near 0: the batch gradient is ~1e-5 of its terms, so fp32
    # rounding of the terms is ~1e-3 of the result — the failure mode of the old ‖g − g_ref‖ / ‖g_ref‖ at large batch.
    size = MLP.parse_size("1024:fp32")
    inputs = MLP.make_inputs(size, np.random.default_rng(0))
    half = size["batch"] // 2
    inputs["x"][half:], inputs["y"][half:] = inputs["x"][:half], 1 - inputs["y"][:half]
    inputs["params"][-2] *= 1e-3
    inputs["params"][-1][:] = 0
    ref = MLP.reference(size, inputs)
    out = _first_step(MLP, size, inputs)
    assert relative_error(out, ref[0]) > 1e-4
    ok, err = MLP.check(out, ref, size)
    assert ok and err < 1e-6


def _wrong_gradients(workload, size, inputs, ref) -> dict[str, np.ndarray]:
    g = ref[0].astype(np.float32)
    sizes = [p.size for p in inputs["params"]]
    start = sum(sizes[: int(np.argmax(sizes))])
    layer = slice(start, start + max(sizes))  # the largest weight
    other = dict(inputs)
    rng = np.random.default_rng(7)
    other["x"] = rng.random(inputs["x"].shape, dtype=np.float32)
    other["y"] = rng.integers(0, 2, size=size["batch"]).astype(np.float32)
    flipped, unwritten, nan = g.copy(), g.copy(), g.copy()
    flipped[layer] *= -1
    unwritten[layer] = 0
    nan[layer] = np.nan
    return {
        "zeros": np.zeros_like(g),
        "another batch": _first_step(workload, size, other),
        "one layer's sign flipped": flipped,
        "one layer left at zero": unwritten,
        "one layer left at NaN": nan,
        "scaled by 2": 2 * g,
        "wrong shape": g[:-1],
    }


@pytest.mark.parametrize(
    ("workload", "label"),
    [(MLP, "8:fp32"), (MLP, "8192:fp32"), (MLP, "32:bf16"), (MLP, "8192:bf16"), (CNN, "8:fp32"), (CNN, "32:bf16")],
)
def test_check_rejects_a_wrong_or_unwritten_gradient(workload, label):
    size = workload.parse_size(label)
    inputs = workload.make_inputs(size, np.random.default_rng(0))
    ref = workload.reference(size, inputs)
    assert workload.check(_first_step(workload, size, inputs), ref, size)[0]
    for name, wrong in _wrong_gradients(workload, size, inputs, ref).items():
        ok, err = workload.check(wrong, ref, size)
        assert not ok, (label, name, err, workload.tolerance(size))


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
