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

from gpukit.bench.kernels.frame import check_frame, frame_f32
from gpukit.errors import BackendUnavailable, WorkloadError

__all__ = [
    "SOURCE",
    "compile_module",
    "mandelbrot",
    "saxpy",
    "source_text",
    "vector_add",
    "vector_add_naive",
]

SOURCE = "kernels.cu"
INSTALL_HINT = "pip install cupy-cuda12x (CUDA 12 driver) or cupy-cuda13x (CUDA 13 driver), matching `nvidia-smi`"
THREADS = 256  # = STREAM_THREADS in kernels.cu; the Mandelbrot kernel also uses 256 (a 32 x 8 pixel tile)
VEC = 4  # elements per 16-byte vector
MANDEL_TILE = (32, 8)  # (columns, rows) per block


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
    module = cupy.RawModule(code=source_text(), options=("--std=c++17",))
    module.compile()  # compile now, so a compile error surfaces here with its log, not at the first launch
    return module


@cache
def _device_shape(device_id: int) -> tuple[int, int]:
    """(SM count, resident 256-thread blocks per SM) of a device, read once."""
    attrs = _cupy().cuda.Device(device_id).attributes
    return int(attrs["MultiProcessorCount"]), max(1, int(attrs["MaxThreadsPerMultiProcessor"]) // THREADS)


def _current_device() -> int:
    return int(_cupy().cuda.Device().id)


def compile_module() -> None:
    """Compile (or fetch from cupy's disk cache) the module for the current device."""
    _module(_current_device())


def _kernel(name: str) -> Any:
    try:
        return _module(_current_device()).get_function(name)
    except BackendUnavailable:
        raise
    except Exception as exc:  # NVRTC/driver errors carry the compiler log in their message
        raise WorkloadError(f"CUDA C kernel {name} failed to compile or load: {exc}", hint=f"see {SOURCE}") from exc


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
            raise WorkloadError(f"{name}: out partly overlaps {label}", hint="use a separate output or exactly x itself")


def _stream_grid(n: int) -> int:
    """One wave: every SM gets its full complement of blocks, fewer when n is small (each thread ≥ one vector)."""
    sms, blocks_per_sm = _device_shape(_current_device())
    return max(1, min(sms * blocks_per_sm, math.ceil(n / (THREADS * VEC))))


def vector_add(a: Any, b: Any, out: Any) -> None:
    """``out = a + b`` for int32 or float32 cupy arrays (int32 wraps on overflow, like numpy)."""
    _check_arrays("vector_add", {"a": a, "b": b, "out": out}, ("int32", "float32"))
    n = int(out.size)
    if n == 0:
        return
    kernel = _kernel("vector_add_f32" if out.dtype == np.float32 else "vector_add_i32")
    kernel((_stream_grid(n),), (THREADS,), (a, b, out, np.int64(n)))


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
    _kernel("saxpy_f32")((_stream_grid(n),), (THREADS,), (np.float32(alpha), x, y, out, np.int64(n)))


def mandelbrot(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """Escape counts of the frame into a C-contiguous int32 cupy array ``out`` of shape (height, width)."""
    cupy = _cupy()
    if not isinstance(out, cupy.ndarray) or out.dtype != np.int32 or out.ndim != 2:
        raise WorkloadError(
            "mandelbrot: out must be a 2-D int32 cupy array", hint="cupy.empty((height, width), dtype=cupy.int32)"
        )
    _check_arrays("mandelbrot", {"out": out}, ("int32",))
    height, width = (int(s) for s in out.shape)
    check_frame(height, width, x0, x1, y0, y1, max_iter)
    f = frame_f32(height, width, x0, x1, y0, y1)
    tw, th = MANDEL_TILE
    grid = (math.ceil(width / tw), math.ceil(height / th))
    args = (out, np.int32(height), np.int32(width), np.float32(f.x0), np.float32(f.dx), np.float32(f.y0),
            np.float32(f.dy), np.int32(max_iter))  # fmt: skip
    _kernel("mandelbrot_f32")(grid, (THREADS,), args)
