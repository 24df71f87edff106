"""What `cnn-train` and `mlp-train` share: one timed call is one full training step (zero grads, forward, binary
cross-entropy, backward, Adam step) of a model from ``gpukit.train.models``, on a batch of fresh random data.

Sizes are ``<batch>:<dtype>``: ``fp32`` is strict IEEE fp32 (TF32 switched off for matmuls and convolutions, so the
row means what it says), ``bf16`` is bf16 autocast with fp32 weights (the usual mixed-precision recipe).

The check, and why it is honest: a training step's *output* is the gradient it computes. The first step's gradient
(every parameter, flattened) is compared with a float64 CPU reference computed from the same initial weights and the
same batch; relative L2 error under 1e-4 for fp32 (measured: ~4e-7 on a CPU). bf16 autocast gets 0.25: bf16 keeps 8
bits of mantissa, so ReLU and max-pool decisions near a tie flip, and the per-sample gradients of random labels
largely cancel in the batch mean, which magnifies what is left (measured on a CPU: 0.004–0.13 across batch sizes).
For bf16 the check therefore catches a wrong, partial or unwritten gradient (error ≥ 1), not bf16's rounding.
Later, timed steps run the identical code; Adam moves the weights, so their gradients differ and are not re-checked.
The first step publishes the gradient into the harness's float32 buffer (that copy is part of the first-call time,
never of a timed step).

Throughput is samples/s; FLOPs ≈ 3 × forward (backward costs about twice the forward); bytes ≈ the batch plus
36 bytes per parameter (weights read, gradients written, Adam reading weights, gradients and two moments and writing
weights and moments, fp32).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from gpukit.bench.workloads.base import Implementation, Size, Workload, relative_error
from gpukit.bench.workloads.gemm import tf32_mode
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch.nn as nn

__all__ = ["DTYPES", "TOLERANCE", "TrainSpec", "make_workload"]

DTYPES = ("fp32", "bf16")
TOLERANCE = {"fp32": 1e-4, "bf16": 0.25}
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
    return Size(f"{batch}:{dtype}", {"batch": batch, "dtype": dtype})


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
    """The first step's gradient in float64 on the CPU, same weights, same batch."""
    import torch
    import torch.nn.functional as F

    model = spec.build().double()
    _load(model, inputs["params"])
    x = torch.from_numpy(inputs["x"]).double()
    y = torch.from_numpy(inputs["y"]).double()
    loss = F.binary_cross_entropy_with_logits(model(x).reshape(-1), y)
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()  # type: ignore[union-attr]


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


def _check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
    err = relative_error(out, ref)
    return err <= TOLERANCE[size["dtype"]], err


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
        tolerance=lambda size: TOLERANCE[size["dtype"]],
        implementations={
            "torch-cpu": Implementation("torch-cpu", _step, prepare=_prepare(spec, "torch-cpu")),
            "torch-cuda": Implementation("torch-cuda", _step, prepare=_prepare(spec, "torch-cuda")),
        },
    )
