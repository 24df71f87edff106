"""vector-add: C = A + B, the seed's first example (int32 and float32).

Counted per call: 1 add per element; bytes = 3 × n × itemsize (read A and B, write C, each once) — memory-bound on
every device, so % of ceiling is against the measured copy bandwidth. Check: exact for int32, relative L2 error ≤ 1e-6
for float32 (one rounding per element: ~6e-8).

``seed-example`` is the article's arrays A=[1..6], B=[7..12] → C=[8,10,12,14,16,18] (`--seed-example`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gpukit.bench.workloads import _common as c
from gpukit.bench.workloads.base import Implementation, Size, Workload, elementwise_check

SEED = Size("seed-example", {"n": 6, "dtype": "int32", "seed": True})


def sizes(quick: bool) -> list[Size]:
    if quick:  # int32 moves the same bytes through the same adds: the full run has it (10 rows, 6 s of an H200's 64)
        return [c.vector_size("16MiB")]
    return [c.vector_size("1MiB"), c.vector_size("256MiB"), c.vector_size("256MiB:int32")]


def parse_size(text: str) -> Size:
    return SEED if text.strip() in ("seed", "seed-example") else c.vector_size(text, dtypes=("float32", "int32"))


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    if size.get("seed"):
        return {"a": np.arange(1, 7, dtype=np.int32), "b": np.arange(7, 13, dtype=np.int32)}
    n, dtype = size["n"], size["dtype"]
    return {"a": c.random_array(rng, n, dtype), "b": c.random_array(rng, n, dtype)}


def reference(size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    if np.dtype(size["dtype"]).kind == "i":
        return inputs["a"].astype(np.int64) + inputs["b"].astype(np.int64)
    return inputs["a"].astype(np.float64) + inputs["b"].astype(np.float64)


def _itemsize(size: Size) -> int:
    return int(np.dtype(size["dtype"]).itemsize)


def _python_import() -> None:
    from gpukit.bench.kernels import cpu  # noqa: F401 - imported before the calibration is timed


# ---- implementations -------------------------------------------------------------------------------------------


def _python(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cpu

    cpu.vector_add_python(inputs["a"], inputs["b"], out)


def _python_estimate(size: Size) -> float:
    small = 100_000
    a = np.ones(small, dtype=np.float32).tolist()
    out: Any = np.empty(small, dtype=np.float32)

    def run() -> None:
        from gpukit.bench.kernels import cpu

        cpu.vector_add_python(a, a, out)

    return c.calibrated_seconds_per_unit("vector_add_python", run, small, warm=lambda: _python_import()) * size["n"]


def _numpy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    np.add(inputs["a"], inputs["b"], out=out)


def _numba_cpu(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.workloads._numba_cpu import vector_add

    vector_add(inputs["a"], inputs["b"], out)


def _torch(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import torch

    torch.add(inputs["a"], inputs["b"], out=out)


def _cupy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import cupy

    cupy.add(inputs["a"], inputs["b"], out=out)


def _cuda_c(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cuda_c

    cuda_c.vector_add(inputs["a"], inputs["b"], out)


def _cuda_c_naive(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cuda_c

    cuda_c.vector_add_naive(inputs["a"], inputs["b"], out)


def _triton(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import triton_kernels

    triton_kernels.vector_add(inputs["a"], inputs["b"], out)


def _numba_cuda(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import numba_cuda

    numba_cuda.vector_add(inputs["a"], inputs["b"], out)


WORKLOAD = Workload(
    name="vector-add",
    description="C = A + B element-wise (the seed's CUDA C example), int32 and float32",
    unit="gbps",
    sizes=sizes,
    parse_size=parse_size,
    make_inputs=make_inputs,
    reference=reference,
    check=elementwise_check,
    output_spec=lambda size: ((size["n"],), size["dtype"]),
    flops=lambda size: float(size["n"]),
    bytes=lambda size: 3.0 * size["n"] * _itemsize(size),
    amount=lambda size, ref: 3.0 * size["n"] * _itemsize(size),
    implementations={
        "python": Implementation("python", _python, estimate_s=_python_estimate, note="the seed's element loop"),
        "numpy": Implementation("numpy", _numpy),
        "numba-cpu": Implementation("numba-cpu", _numba_cpu, note="@njit(parallel=True) prange loop"),
        "torch-cpu": Implementation("torch-cpu", _torch),
        "torch-cuda": Implementation("torch-cuda", _torch),
        "cupy": Implementation("cupy", _cupy, note="array expression"),
        "cupy-cuda-c": Implementation("cupy", _cuda_c, note="RawKernel: grid-stride, 64-bit index, vector loads"),
        "cupy-cuda-c-naive": Implementation("cupy", _cuda_c_naive, note="the seed's one thread per element"),
        "triton": Implementation("triton", _triton),
        "numba-cuda": Implementation("numba-cuda", _numba_cuda),
    },
)
