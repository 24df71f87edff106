"""CUDA C kernels (``kernels.cu``) compiled at run time by NVRTC through ``cupy.RawModule``, on cupy arrays.

Every function launches asynchronously on cupy's current stream, writes into ``out`` and returns None; the first
call on a device compiles the module (``compile_module`` does it up front, so a caller can time it apart).
"""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from types import ModuleType
from typing import Any

import numpy as np

from gpukit.bench.kernels.frame import launch_scalars
from gpukit.errors import BackendUnavailable, WorkloadError

__all__ = [
    "SOURCE",
    "compile_module",
    "mandelbrot",
    "mandelbrot_naive",
    "saxpy",
    "source_text",
    "vector_add",
    "vector_add_naive",
]

SOURCE = "kernels.cu"
INSTALL_HINT = "pip install cupy-cuda12x (CUDA 12 driver) or cupy-cuda13x (CUDA 13 driver), matching `nvidia-smi`"
THREADS = 256  # the Mandelbrot kernels' block (a 32 x 8 pixel tile)
STREAM_THREADS = 128  # = STREAM_THREADS in kernels.cu (vector add, SAXPY)
STREAM_VECS = 4  # = STREAM_VECS in kernels.cu: 16-byte vectors per thread per pass
_MAX_STREAM_BLOCKS = 2**31 - 1  # the grid's x limit
VEC = 4  # elements per 16-byte vector
MANDEL_TILE = (32, 8)  # (columns, rows) per block
NVRTC_OPTIONS = ("--std=c++17",)  # no fast-math: the Mandelbrot kernel depends on IEEE rounding


def _cupy() -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailable(f"cupy is not importable: {exc}", hint=INSTALL_HINT) from exc
    return cupy


def source_text() -> str:
    """The CUDA C source, read from the installed package."""
    return resources.files("gpukit.bench.kernels").joinpath(SOURCE).read_text(encoding="utf-8")


@cache
def _module(device_id: int) -> Any:
    """One compiled module per device per process (NVRTC targets the current device's architecture)."""
    cupy = _cupy()
    module = cupy.RawModule(code=source_text(), options=NVRTC_OPTIONS)
    module.compile()  # compile now, so a compile error surfaces here with its log, not at the first launch
    return module


def _current_device() -> int:
    return int(_cupy().cuda.runtime.getDevice())


def compile_module() -> None:
    """Compile (or fetch from cupy's disk cache) the module for the current device."""
    _module(_current_device())


@cache
def _function(device_id: int, name: str) -> Any:
    """A kernel of the device's module, looked up once (this sits on the launch path of microsecond kernels)."""
    try:
        return _module(device_id).get_function(name)
    except BackendUnavailable:
        raise
    except Exception as exc:  # NVRTC/driver errors carry the compiler log in their message
        raise WorkloadError(f"CUDA C kernel {name} failed to compile or load: {exc}", hint=f"see {SOURCE}") from exc


def _kernel(name: str) -> Any:
    return _function(_current_device(), name)


def _check_arrays(name: str, arrays: dict[str, Any], dtypes: tuple[str, ...]) -> None:
    """Same shape, one allowed dtype, C-contiguous, on the current device; out must not partly overlap an input."""
    cupy = _cupy()
    device = _current_device()
    first = next(iter(arrays.values()))
    for label, arr in arrays.items():
        if not isinstance(arr, cupy.ndarray):
            raise WorkloadError(
                f"{name}: {label} is a {type(arr).__name__}, not a cupy array", hint="move it with cupy.asarray(x)"
            )
        if str(arr.dtype) not in dtypes or arr.dtype != first.dtype:
            raise WorkloadError(
                f"{name}: {label} has dtype {arr.dtype}; all operands must share one of {', '.join(dtypes)}",
                hint="convert with x.astype(...)",
            )
        if arr.shape != first.shape:
            raise WorkloadError(f"{name}: {label} has shape {arr.shape}, expected {first.shape}", hint="match shapes")
        if not arr.flags.c_contiguous:
            raise WorkloadError(f"{name}: {label} is not C-contiguous", hint="pass cupy.ascontiguousarray(x)")
        if arr.device.id != device:
            raise WorkloadError(
                f"{name}: {label} lives on device {arr.device.id}, the current device is {device}",
                hint=f"call it inside `with cupy.cuda.Device({arr.device.id}):`",
            )
    out = arrays["out"]
    out_lo, out_hi = out.data.ptr, out.data.ptr + out.nbytes
    for label, arr in arrays.items():
        lo = arr.data.ptr
        if label != "out" and lo != out_lo and lo < out_hi and out_lo < lo + arr.nbytes:
            raise WorkloadError(
                f"{name}: out partly overlaps {label}", hint="use a separate output or exactly x itself"
            )


def _stream_grid(n: int) -> int:
    """Blocks to cover n elements once, STREAM_VECS 16-byte vectors per thread (the kernel's grid-stride loop covers
    the rest if the cap ever binds)."""
    return max(1, min(_MAX_STREAM_BLOCKS, math.ceil(n / (STREAM_THREADS * STREAM_VECS * VEC))))


def spin(cycles: int) -> None:
    """Queue a one-thread kernel that spins for ``cycles`` SM clock cycles (the timing pad; not a workload)."""
    _kernel("gpukit_spin")((1,), (1,), (np.int64(cycles),))


def vector_add(a: Any, b: Any, out: Any) -> None:
    """``out = a + b`` for int32 or float32 cupy arrays (int32 wraps on overflow, like numpy)."""
    _check_arrays("vector_add", {"a": a, "b": b, "out": out}, ("int32", "float32"))
    n = int(out.size)
    if n == 0:
        return
    kernel = _kernel("vector_add_f32" if out.dtype == np.float32 else "vector_add_i32")
    kernel((_stream_grid(n),), (STREAM_THREADS,), (a, b, out, np.int64(n)))


def vector_add_naive(a: Any, b: Any, out: Any) -> None:
    """The seed's one-element-per-thread vectorAdd (with a bounds check): the comparison point for vector_add."""
    _check_arrays("vector_add_naive", {"a": a, "b": b, "out": out}, ("int32", "float32"))
    n = int(out.size)
    if n == 0:
        return
    kernel = _kernel("vector_add_naive_f32" if out.dtype == np.float32 else "vector_add_naive_i32")
    kernel((math.ceil(n / THREADS),), (THREADS,), (a, b, out, np.int64(n)))


def saxpy(alpha: float, x: Any, y: Any, out: Any) -> None:
    """``out = alpha·x + y`` (one fused multiply-add per element) for float32 cupy arrays."""
    _check_arrays("saxpy", {"x": x, "y": y, "out": out}, ("float32",))
    if not math.isfinite(float(alpha)):
        raise WorkloadError(f"saxpy: alpha={alpha!r} is not finite", hint="pass a finite float")
    n = int(out.size)
    if n == 0:
        return
    _kernel("saxpy_f32")((_stream_grid(n),), (STREAM_THREADS,), (np.float32(alpha), x, y, out, np.int64(n)))


def _frame_args(name: str, out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> tuple[Any, ...]:
    cupy = _cupy()
    if not isinstance(out, cupy.ndarray) or out.dtype != np.int32 or out.ndim != 2:
        raise WorkloadError(
            f"{name}: out must be a 2-D int32 cupy array", hint="cupy.empty((height, width), dtype=cupy.int32)"
        )
    _check_arrays(name, {"out": out}, ("int32",))
    height, width = out.shape
    return (out, np.int32(height), np.int32(width), *launch_scalars(int(height), int(width), x0, x1, y0, y1, max_iter))


def mandelbrot(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """Escape counts of the frame into a C-contiguous int32 cupy array ``out`` of shape (height, width)."""
    args = _frame_args("mandelbrot", out, x0, x1, y0, y1, max_iter)
    tw, th = MANDEL_TILE
    grid = (math.ceil(int(args[2]) / tw), math.ceil(int(args[1]) / th))
    _kernel("mandelbrot_f32")(grid, (THREADS,), args)


def mandelbrot_naive(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """The straightforward kernel in CUDA C (one pixel per thread, 16 × 16 blocks): separates language from method."""
    args = _frame_args("mandelbrot_naive", out, x0, x1, y0, y1, max_iter)
    grid = (math.ceil(int(args[2]) / 16), math.ceil(int(args[1]) / 16))
    _kernel("mandelbrot_naive_f32")(grid, (16, 16), args)
