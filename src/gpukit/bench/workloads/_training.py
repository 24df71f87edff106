"""What `cnn-train` and `mlp-train` share: one timed call is one full training step (zero grads, forward, binary
cross-entropy, backward, Adam step) of a model from ``gpukit.train.models``, on a batch of fresh random data.

Sizes are ``<batch>:<dtype>``: ``fp32`` is strict IEEE fp32 (TF32 switched off for matmuls and convolutions, so the
row means what it says), ``bf16`` is bf16 autocast with fp32 weights (the usual mixed-precision recipe).

The check, and why it is honest: a training step's *output* is the gradient it computes. The first step's gradient
g (every parameter, flattened) is compared with a float64 CPU reference g_ref computed from the same initial weights
and the same batch. Later, timed steps run the identical code; Adam moves the weights, so their gradients differ and
are not re-checked. The first step publishes the gradient into the harness's float32 buffer (that copy is part of the
first-call time, never of a timed step).

What the error is divided by. g_ref = (1/B) Σᵢ δᵢ ∂zᵢ/∂θ, with δᵢ = σ(zᵢ) − yᵢ the loss's slope at sample i's logit.
With random labels the δᵢ carry random signs, so g_ref is a difference of larger terms (‖g_ref‖ is 1/15–1/60 of the
terms' size at batch ≥ 2048), and any error made on one term — fp32 rounding, or a ReLU whose pre-activation rounds
across zero, which moves a whole sample's term through that unit and does so identically on every fp32 device — is
magnified by that ratio in ‖g − g_ref‖ / ‖g_ref‖. An H200 sweep failed batch 8192 fp32 that way (2.8e-4, the same on
torch-cpu and torch-cuda: a property of the data, not of a device). So the error is relative to the size of what was
summed, the usual yardstick of a sum's rounding:

    error = ‖g − g_ref‖ / ‖g_abs‖,  g_abs = (1/B) Σᵢ |δᵢ| ∂zᵢ/∂θ  (the same terms, none cancelling by label).

g_abs costs nothing extra: δᵢ > 0 exactly when yᵢ = 0 (σ ∈ (0, 1)), so the reference runs its forward and backward
once over the y = 0 samples (giving g₀) and once over the y = 1 samples (g₁), no more work than one pass over the
batch, and g_ref = g₀ + g₁, g_abs = g₀ − g₁. (This needs samples that do not interact — no batch norm; the seed
models have none.) A wrong gradient keeps its size on this scale: zeros, another batch's gradient or a gradient
scaled by 2 are off by ‖g_ref‖ / ‖g_abs‖ or more (measured 0.04–1 across the ladders), a layer left unwritten or
with its sign flipped by that layer's share of it. The limit, inherent to any check: a batch whose gradient cancels
to below the tolerance of its terms (‖g_ref‖ < 1e-3·‖g_abs‖ in fp32) cannot be told from zero — nor can fp32 resolve
it; random labels stay far from that.

Tolerances (``tolerance(size)``). fp32: 1e-3 at every batch. Rounding alone is far below it: fp32's unit roundoff
is 2⁻²⁴ ≈ 6e-8 and summing the batch adds about √B·u (1e-5 at the largest ladder batch). What sets it is the ReLU
tie: a pre-activation within rounding of zero takes the other branch, which moves one sample's term through one unit,
~0.2/B of g_abs (measured: one of 40 seeds at batch 2048 gave 1.1e-4). Such flips hit about 1 sample in 10⁵, so
from batch 256 up a flip stays under 1e-3 (a few do from 1024), and a smaller batch sees one in under 3 rows in a
thousand (1 in 10⁵ at batch 1) — the residual risk any fixed tolerance has with ReLU. Measured
on a CPU, 40 seeds: ≤ 3e-7 without a flip, 1.1e-4 with one; zeros, another batch, ×2 or the largest layer's sign
flipped or left unwritten ≥ 4e-3 at every mlp-train ladder batch up to 8192 (≥ 2.4e-3 at 32768).

bf16 autocast: 0.25/√B. bf16 keeps 8 bits (u = 2⁻⁸), so about one ReLU or max-pool decision per sample lands on the
other side of a tie, each moving that sample's term; these events are independent across samples, so their sum grows
as √B while ‖g_abs‖ grows as B. Measured (40 seeds, CPU): error·√B ≤ 0.17 at batch 1 and ≤ 0.1 above; zeros,
another batch, ×2 or the largest layer's sign flipped ≥ 0.37. bf16's own error is within 2–6× of a wrong gradient's,
so its check catches whole-gradient mistakes, and a layer left unwritten only where that layer carries more than
about a quarter of the gradient.

Throughput is samples/s; FLOPs ≈ 3 × forward (backward costs about twice the forward); bytes ≈ the batch plus
36 bytes per parameter (weights read, gradients written, Adam reading weights, gradients and two moments and writing
weights and moments, fp32).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from gpukit.bench.workloads.base import Implementation, Size, Workload
from gpukit.bench.workloads.gemm import tf32_mode
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch.nn as nn

__all__ = ["DTYPES", "TOLERANCE", "TrainSpec", "make_workload", "tolerance"]

DTYPES = ("fp32", "bf16")
TOLERANCE = {"fp32": 1e-3, "bf16": 0.25}  # on ‖g − g_ref‖ / ‖g_abs‖ at batch 1; bf16's falls as 1/√batch
ADAM_BYTES_PER_PARAM = 36


@dataclass(frozen=True)
class TrainSpec:
    name: str
    description: str
    build: Callable[[], nn.Module]  # a fresh fp32 model on the CPU, returning one logit per sample
    sample_shape: tuple[int, ...]  # one input sample
    forward_flops: int  # per sample
    ladder: tuple[int, ...]
    quick: tuple[int, ...]


def size_of(batch: int, dtype: str) -> Size:
    return Size(f"{batch}:{dtype}", {"batch": batch, "dtype": dtype}, magnitude=float(batch), group=dtype)


def _parse(text: str) -> Size:
    m = re.fullmatch(r"\s*(\d+)\s*(?:[:-]\s*(\w+))?\s*", text)
    if not m:
        raise ConfigError(f"bad batch size '{text}'", hint="use <batch>:<dtype>, e.g. 32:fp32 or 128:bf16")
    batch, dtype = int(m.group(1)), (m.group(2) or "fp32").lower()
    if dtype not in DTYPES:
        raise ConfigError(f"unknown training dtype '{dtype}'", hint="use fp32 or bf16 (autocast)")
    if not 1 <= batch <= 1 << 20:
        raise ConfigError(f"batch {batch} is out of range", hint="use 1 ≤ batch ≤ 1048576")
    return size_of(batch, dtype)


@cache
def _param_count(spec: TrainSpec) -> int:
    return sum(p.numel() for p in spec.build().parameters())


def _inputs(spec: TrainSpec, size: Size, rng: np.random.Generator) -> dict[str, Any]:
    import torch

    b = size["batch"]
    torch.manual_seed(int(rng.integers(2**31)))  # the initial weights, shared by every backend and the reference
    params = [p.detach().numpy().copy() for p in spec.build().parameters()]
    return {
        "x": rng.random((b, *spec.sample_shape), dtype=np.float32),
        "y": rng.integers(0, 2, size=b).astype(np.float32),  # binary labels
        "params": params,
    }


def _load(model: nn.Module, params: list[np.ndarray]) -> None:
    import torch

    with torch.no_grad():
        for p, value in zip(model.parameters(), params, strict=True):
            p.copy_(torch.from_numpy(value))


def _reference(spec: TrainSpec, size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    """The first step's gradient in float64 on the CPU, same weights, same batch: row 0 is g_ref, row 1 is g_abs (see
    the module docstring), from one pass over the y = 0 samples and one over the y = 1 samples."""
    import torch
    import torch.nn.functional as F

    model = spec.build().double()
    _load(model, inputs["params"])
    x = torch.from_numpy(inputs["x"]).double()
    y = torch.from_numpy(inputs["y"]).double()
    parts = []
    for label in (0.0, 1.0):  # δ = σ(z) − y is > 0 on every y = 0 sample and < 0 on every y = 1 sample
        model.zero_grad(set_to_none=False)
        pick = y == label
        if bool(pick.any()):
            logits = model(x[pick]).reshape(-1)
            loss = F.binary_cross_entropy_with_logits(logits, y[pick], reduction="sum") / size["batch"]
            loss.backward()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
        parts.append(torch.cat([g.reshape(-1) for g in grads]).numpy().copy())
    g0, g1 = parts
    return np.stack([g0 + g1, g0 - g1])


def _prepare(spec: TrainSpec, backend: str) -> Callable[[Mapping[str, Any], Size], dict[str, Any]]:
    """Host→device (timed as such): the batch, and the model with its initial weights and a fresh Adam."""

    def prepare(host: Mapping[str, Any], size: Size) -> dict[str, Any]:
        import torch

        from gpukit.bench.backends import get_backend

        device = get_backend(backend).device
        model = spec.build()
        _load(model, host["params"])
        model = model.to(device)
        return {
            "model": model,
            "opt": torch.optim.Adam(model.parameters(), lr=1e-3),
            "x": torch.from_numpy(host["x"]).to(device),
            "y": torch.from_numpy(host["y"]).to(device),
            "device": device,
            "published": [False],
        }

    return prepare


def _step(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import torch
    import torch.nn.functional as F

    model, opt, device = inputs["model"], inputs["opt"], inputs["device"]
    bf16 = size["dtype"] == "bf16"
    # fp32 rows are IEEE fp32: cuDNN convolutions default to TF32 on Ampere and later, which would make them TF32 rows
    strict = tf32_mode(False, cudnn=False) if device == "cuda" and not bf16 else contextlib.nullcontext()
    with strict:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
            logits = model(inputs["x"]).reshape(-1)
        loss = F.binary_cross_entropy_with_logits(logits.float(), inputs["y"])
        loss.backward()
        if not inputs["published"][0]:  # first step only: its gradient is the checked output
            out.copy_(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).float())
            inputs["published"][0] = True
        opt.step()


def tolerance(size: Size) -> float:
    """The largest accepted ‖g − g_ref‖ / ‖g_abs‖ for this batch and dtype (why: the module docstring)."""
    dtype = size.params.get("dtype", "fp32")
    if dtype == "bf16":
        return TOLERANCE["bf16"] / math.sqrt(size["batch"])
    return TOLERANCE["fp32"]


def gradient_error(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − g_ref‖ / ‖g_abs‖ in float64 for ``ref`` = [g_ref, g_abs]; NaN, inf or a wrong shape gives +inf."""
    g_ref, g_abs = np.asarray(ref[0], dtype=np.float64), np.asarray(ref[1], dtype=np.float64)
    if out.shape != g_ref.shape:
        return float("inf")
    o = np.asarray(out, dtype=np.float64)
    if not np.all(np.isfinite(o)):
        return float("inf")
    diff, scale = float(np.linalg.norm(o - g_ref)), float(np.linalg.norm(g_abs))
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def _check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
    err = gradient_error(out, ref)
    return err <= tolerance(size), err


def make_workload(spec: TrainSpec) -> Workload:
    def flops(size: Size) -> float:
        return 3.0 * spec.forward_flops * size["batch"]

    def nbytes(size: Size) -> float:
        sample = 4 * (int(np.prod(spec.sample_shape)) + 1)
        return float(sample * size["batch"] + ADAM_BYTES_PER_PARAM * _param_count(spec))

    def sizes(quick: bool) -> list[Size]:
        if quick:
            return [size_of(b, "fp32") for b in spec.quick]
        return [size_of(b, dt) for dt in DTYPES for b in spec.ladder]

    return Workload(
        name=spec.name,
        description=spec.description,
        unit="samples_per_s",
        sizes=sizes,
        parse_size=_parse,
        make_inputs=lambda size, rng: _inputs(spec, size, rng),
        reference=lambda size, inputs: _reference(spec, size, inputs),
        check=_check,
        output_spec=lambda size: ((_param_count(spec),), "float32"),
        flops=flops,
        bytes=nbytes,
        amount=lambda size, ref: float(size["batch"]),
        ceiling=None,  # no honest single ceiling for a whole training step
        tolerance=tolerance,
        checks_timed_calls=False,  # the first step's gradient is the checked output (module docstring)
        implementations={
            "torch-cpu": Implementation("torch-cpu", _step, prepare=_prepare(spec, "torch-cpu")),
            "torch-cuda": Implementation("torch-cuda", _step, prepare=_prepare(spec, "torch-cuda")),
        },
    )
