"""saxpy: out = alpha · x + y in float32 (BLAS's "Hello World" the seed's commenters pointed to).

Counted per call: 2 flops per element; bytes = 3 × n × 4 (read x and y, write out) — memory-bound, % of ceiling is
against the measured copy bandwidth. Check: relative L2 error against a float64 reference ≤ 1e-6 (float32 rounds at
most twice per element, ~1e-7; an FMA rounds once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gpukit.bench.workloads import _common as c
from gpukit.bench.workloads.base import Implementation, Size, Workload, elementwise_check


def sizes(quick: bool) -> list[Size]:
    return [c.vector_size("16MiB")] if quick else [c.vector_size("1MiB"), c.vector_size("256MiB")]


def parse_size(text: str) -> Size:
    return c.vector_size(text, dtypes=("float32",))


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    n = size["n"]
    alpha = float(np.float32(rng.uniform(1.5, 3.5)))  # a float32-representable scalar, never 0 or 1
    return {"alpha": alpha, "x": c.random_array(rng, n, "float32"), "y": c.random_array(rng, n, "float32")}


def reference(size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    return inputs["alpha"] * inputs["x"].astype(np.float64) + inputs["y"].astype(np.float64)


def _python_import() -> None:
    from gpukit.bench.kernels import cpu  # noqa: F401 - imported before the calibration is timed


# ---- implementations -------------------------------------------------------------------------------------------


def _python(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cpu

    cpu.saxpy_python(inputs["alpha"], inputs["x"], inputs["y"], out)


def _python_estimate(size: Size) -> float:
    small = 100_000
    x = np.ones(small, dtype=np.float32).tolist()
    out: Any = np.empty(small, dtype=np.float32)

    def run() -> None:
        from gpukit.bench.kernels import cpu

        cpu.saxpy_python(2.0, x, x, out)

    return c.calibrated_seconds_per_unit("saxpy_python", run, small, warm=lambda: _python_import()) * size["n"]


def _numpy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    # Two passes (multiply into out, then add y): how NumPy evaluates the expression, without a temporary.
    np.multiply(np.float32(inputs["alpha"]), inputs["x"], out=out)
    np.add(out, inputs["y"], out=out)


def _numba_cpu(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.workloads._numba_cpu import saxpy

    saxpy(inputs["alpha"], inputs["x"], inputs["y"], out)


def _torch(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import torch

    torch.add(inputs["y"], inputs["x"], alpha=inputs["alpha"], out=out)  # one fused pass: y + alpha·x


def _cupy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import cupy

    cupy.multiply(np.float32(inputs["alpha"]), inputs["x"], out=out)
    cupy.add(out, inputs["y"], out=out)


def _cuda_c(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cuda_c

    cuda_c.saxpy(inputs["alpha"], inputs["x"], inputs["y"], out)


def _triton(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import triton_kernels

    triton_kernels.saxpy(inputs["alpha"], inputs["x"], inputs["y"], out)


def _numba_cuda(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import numba_cuda

    numba_cuda.saxpy(inputs["alpha"], inputs["x"], inputs["y"], out)


WORKLOAD = Workload(
    name="saxpy",
    description="out = alpha·x + y in float32",
    unit="gbps",
    sizes=sizes,
    parse_size=parse_size,
    make_inputs=make_inputs,
    reference=reference,
    check=elementwise_check,
    output_spec=lambda size: ((size["n"],), "float32"),
    flops=lambda size: 2.0 * size["n"],
    bytes=lambda size: 12.0 * size["n"],
    amount=lambda size, ref: 12.0 * size["n"],
    implementations={
        "python": Implementation("python", _python, estimate_s=_python_estimate, note="plain loop"),
        "numpy": Implementation("numpy", _numpy, note="two passes: multiply, add"),
        "numba-cpu": Implementation("numba-cpu", _numba_cpu),
        "torch-cpu": Implementation("torch-cpu", _torch),
        "torch-cuda": Implementation("torch-cuda", _torch),
        "cupy": Implementation("cupy", _cupy, note="array expression, two passes"),
        "cupy-cuda-c": Implementation("cupy", _cuda_c, note="RawKernel: grid-stride, 64-bit index, vector loads"),
        "triton": Implementation("triton", _triton),
        "numba-cuda": Implementation("numba-cuda", _numba_cuda),
    },
)
