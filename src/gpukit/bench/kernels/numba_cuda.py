"""Numba CUDA kernels on numba device arrays (``numba.cuda.to_device`` / ``device_array``).

``mandelbrot_naive`` is THE straightforward float32 kernel the optimised Mandelbrot kernels are measured against:
one pixel per thread, 16 × 16 blocks, the seed's ``mandel_kernel`` computing in float32. ``mandelbrot`` is the same
function done with less work (see kernels.cu for the three ideas); it pins its arithmetic with libdevice's
correctly rounded ``fmul_rn``/``fadd_rn``/``fsub_rn``/``fmaf_rn`` (never contracted by the compiler) to exactly
what NVVM compiles the naive kernel's expressions to, so both return the same counts pixel for pixel.

Every function launches asynchronously on the default stream and returns None. numba.cuda is imported on first
use; under ``NUMBA_ENABLE_CUDASIM=1`` the same kernels run in numba's CPU simulator (tests use this).
"""

from __future__ import annotations

import math
from functools import cache
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

from gpukit.bench.kernels.frame import launch_scalars
from gpukit.errors import BackendUnavailable, WorkloadError

__all__ = ["mandelbrot", "mandelbrot_naive", "saxpy", "vector_add"]

NAIVE_BLOCK = (16, 16)  # the seed's threadsperblock
THREADS = 256
MANDEL_TILE = (32, 8)  # (columns, rows) per 256-thread block of the optimised kernel, 8 x 4 pixels per warp
UNROLL = 8  # steps between escape checks in the optimised kernel (written out by hand below)

# numba.cuda, bound on first use. The kernels must see it as a module global (not a closure variable): the CUDA
# simulator swaps the kernels' global `cuda` for its fake module.
cuda: Any = None


def _cuda() -> ModuleType:
    try:
        from numba import cuda
    except Exception as exc:  # numba-cuda 0.30 fails at import under numpy 2.5 (np.row_stack removed)
        raise BackendUnavailable(
            f"numba.cuda failed to import ({type(exc).__name__}: {exc}) with numpy {np.__version__} and "
            f"numba-cuda {_version('numba-cuda')}",
            hint="pip install 'numpy<2.5' (numba-cuda 0.30 needs it) or a numba-cuda release that supports your numpy",
        ) from exc
    if not _simulated() and not cuda.is_available():
        raise BackendUnavailable("numba.cuda sees no CUDA GPU", hint="check `nvidia-smi` and the CUDA driver")
    return cuda


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _simulated() -> bool:
    from numba import config

    return bool(getattr(config, "ENABLE_CUDASIM", 0))


def _rounded_ops() -> tuple[Any, Any, Any, Any]:
    """(fmul, fadd, fsub, fma), each rounded once to float32; libdevice on the GPU, numpy in the simulator."""
    if not _simulated():
        from numba.cuda import libdevice

        return libdevice.fmul_rn, libdevice.fadd_rn, libdevice.fsub_rn, libdevice.fmaf_rn
    from gpukit.bench.kernels.cpu import fma_f32

    f32 = np.float32

    # Orbits that escaped inside an unchecked block overflow to inf/NaN on purpose; numpy would warn each time.
    def fmul(a: Any, b: Any) -> Any:
        with np.errstate(all="ignore"):
            return f32(a) * f32(b)

    def fadd(a: Any, b: Any) -> Any:
        with np.errstate(all="ignore"):
            return f32(a) + f32(b)

    def fsub(a: Any, b: Any) -> Any:
        with np.errstate(all="ignore"):
            return f32(a) - f32(b)

    def fma(a: Any, b: Any, c: Any) -> Any:
        with np.errstate(all="ignore"):
            return f32(fma_f32(a, b, c))

    return fmul, fadd, fsub, fma


@cache
def _kernels() -> SimpleNamespace:
    global cuda
    cuda = _cuda()
    from numba import float32

    fmul, fadd, fsub, fma = _rounded_ops()

    # Grid-stride loops, four elements per thread per trip with every load issued before the first store: numba
    # has no 16-byte vector loads, so independent scalar loads are what keeps enough bytes in flight.
    @cuda.jit
    def vector_add_k(a, b, out):  # type: ignore[no-untyped-def]
        n = out.size
        stride = cuda.gridsize(1)
        i = cuda.grid(1)
        while i + 3 * stride < n:
            a0, a1, a2, a3 = a[i], a[i + stride], a[i + 2 * stride], a[i + 3 * stride]
            b0, b1, b2, b3 = b[i], b[i + stride], b[i + 2 * stride], b[i + 3 * stride]
            out[i] = a0 + b0
            out[i + stride] = a1 + b1
            out[i + 2 * stride] = a2 + b2
            out[i + 3 * stride] = a3 + b3
            i += 4 * stride
        while i < n:
            out[i] = a[i] + b[i]
            i += stride

    @cuda.jit
    def saxpy_k(alpha, x, y, out):  # type: ignore[no-untyped-def]
        n = out.size
        stride = cuda.gridsize(1)
        i = cuda.grid(1)
        while i + 3 * stride < n:
            x0, x1, x2, x3 = x[i], x[i + stride], x[i + 2 * stride], x[i + 3 * stride]
            y0, y1, y2, y3 = y[i], y[i + stride], y[i + 2 * stride], y[i + 3 * stride]
            out[i] = alpha * x0 + y0
            out[i + stride] = alpha * x1 + y1
            out[i + 2 * stride] = alpha * x2 + y2
            out[i + 3 * stride] = alpha * x3 + y3
            i += 4 * stride
        while i < n:
            out[i] = alpha * x[i] + y[i]
            i += stride

    @cuda.jit
    def mandel_naive_k(out, x0, dx, y0, dy, max_iter):  # type: ignore[no-untyped-def]
        col, row = cuda.grid(2)
        height, width = out.shape
        if row < height and col < width:
            x = x0 + float32(col) * dx
            y = y0 + float32(row) * dy
            zr = float32(0.0)
            zi = float32(0.0)
            n = max_iter
            for i in range(max_iter):
                zr2 = zr * zr
                zi2 = zi * zi
                if zr2 + zi2 > float32(4.0):
                    n = i
                    break
                zi = float32(2.0) * zr * zi + y
                zr = zr2 - zi2 + x
            out[row, col] = n

    @cuda.jit(device=True)
    def step(zr, zi, zr2, zi2, cx, cy):  # type: ignore[no-untyped-def]
        zi = fma(fadd(zr, zr), zi, cy)
        zr = fadd(fsub(zr2, zi2), cx)
        return zr, zi, fmul(zr, zr), fmul(zi, zi)

    @cuda.jit(device=True)
    def in_main_bulbs(x, y):  # type: ignore[no-untyped-def]
        # Main cardioid and period-2 bulb: their points never escape (margin 1e-5: see kernels.cu).
        xm = x - float32(0.25)
        y2 = y * y
        q = xm * xm + y2
        if q * (q + xm) <= float32(0.25) * y2 - float32(1e-5):
            return True
        xp = x + float32(1.0)
        return xp * xp + y2 <= float32(0.0625) - float32(1e-5)

    @cuda.jit(device=True)
    def count(cx, cy, max_iter):  # type: ignore[no-untyped-def]
        zr = float32(0.0)
        zi = float32(0.0)
        zr2 = float32(0.0)
        zi2 = float32(0.0)
        n = 0
        # Check escape once per 8 steps, rewinding when it fired (exact; why it is safe for |c| < 1.975: kernels.cu)
        if cx * cx + cy * cy < float32(3.9):
            while n <= max_iter - 8:
                sr = zr
                si = zi
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
                if not fadd(zr2, zi2) <= float32(4.0):
                    zr = sr
                    zi = si
                    zr2 = fmul(sr, sr)
                    zi2 = fmul(si, si)
                    break
                n += 8
        while n < max_iter:
            if fadd(zr2, zi2) > float32(4.0):
                return n
            zr, zi, zr2, zi2 = step(zr, zi, zr2, zi2, cx, cy)
            n += 1
        return max_iter

    @cuda.jit
    def mandel_k(out, x0, dx, y0, dy, max_iter):  # type: ignore[no-untyped-def]
        lane = cuda.threadIdx.x & 31
        warp = cuda.threadIdx.x >> 5
        col = cuda.blockIdx.x * 32 + (warp & 3) * 8 + (lane & 7)
        row = cuda.blockIdx.y * 8 + (warp >> 2) * 4 + (lane >> 3)
        height, width = out.shape
        if row < height and col < width:
            cx = fma(float32(col), dx, x0)
            cy = fma(float32(row), dy, y0)
            if in_main_bulbs(cx, cy):
                out[row, col] = max_iter
            else:
                out[row, col] = count(cx, cy, max_iter)

    return SimpleNamespace(
        vector_add=vector_add_k, saxpy=saxpy_k, mandel_naive=mandel_naive_k, mandel=mandel_k, cuda=cuda
    )


@cache
@cache
def _spin_kernel() -> tuple[Any, Any]:
    cuda = _cuda()

    @cuda.jit
    def spin_k(n, out):  # type: ignore[no-untyped-def]
        # a chain of dependent multiply-adds: n steps of the FMA latency, and `out` keeps it from being removed
        acc = out[0]
        for _ in range(n):
            acc = acc * 0.999 + 1.0
        out[0] = acc

    return spin_k, cuda.to_device(np.zeros(1, dtype=np.float64))


def spin(n: int) -> None:
    """Queue a one-thread kernel that runs ``n`` dependent multiply-adds (the timing pad; not a workload)."""
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    kernel, scratch = _spin_kernel()
    with warnings.catch_warnings():  # one thread on purpose: numba's low-occupancy warning does not apply
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        kernel[1, 1](n, scratch)


def _stream_grid_cap() -> tuple[int, int]:
    """(blocks, threads per block) for the grid-stride kernels: one full wave on the current GPU."""
    cuda = _kernels().cuda
    if _simulated():
        return 4, 32  # the simulator runs one Python thread per GPU thread: keep it small, still grid-strided
    device = cuda.get_current_device()
    # CUDA's enum is CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR (numba looks attributes up by that name);
    # an H200 run caught the earlier misspelling, which the simulator's fake device never asks for.
    per_sm = max(1, int(device.MAX_THREADS_PER_MULTIPROCESSOR) // THREADS)
    return int(device.MULTIPROCESSOR_COUNT) * per_sm, THREADS


def _as_device_array(name: str, label: str, arr: Any) -> Any:
    cuda = _kernels().cuda
    if _simulated():
        ok = hasattr(arr, "copy_to_host")
    else:
        ok = cuda.is_cuda_array(arr)
        if ok and not hasattr(arr, "copy_to_host"):  # a cupy array or torch tensor: view it as numba's own
            arr = cuda.as_cuda_array(arr)
    if not ok:
        raise WorkloadError(
            f"{name}: {label} is a {type(arr).__name__}, not a CUDA device array",
            hint="move it with numba.cuda.to_device(x)",
        )
    return arr


def _check(name: str, arrays: dict[str, Any], dtypes: tuple[str, ...], ndim: int | None = None) -> list[Any]:
    """Device arrays of one allowed dtype and one shape, C-contiguous; returns them as numba device arrays."""
    out = [_as_device_array(name, label, arr) for label, arr in arrays.items()]
    first = out[0]
    for label, arr in zip(arrays, out, strict=True):
        if str(arr.dtype) not in dtypes or arr.dtype != first.dtype:
            raise WorkloadError(
                f"{name}: {label} has dtype {arr.dtype}; all operands must share one of {', '.join(dtypes)}",
                hint="convert on the host with x.astype(...) before cuda.to_device",
            )
        if tuple(arr.shape) != tuple(first.shape) or (ndim is not None and len(arr.shape) != ndim):
            raise WorkloadError(f"{name}: {label} has shape {tuple(arr.shape)}", hint="pass arrays of one shape")
        if not arr.is_c_contiguous():
            raise WorkloadError(f"{name}: {label} is not C-contiguous", hint="copy it into a contiguous array")
    return out


def vector_add(a: Any, b: Any, out: Any) -> None:
    """``out = a + b`` for int32 or float32 device arrays: grid-stride loop, one full wave of blocks."""
    a, b, out = _check("vector_add", {"a": a, "b": b, "out": out}, ("int32", "float32"))
    if out.size == 0:
        return
    blocks, threads = _stream_grid_cap()
    _kernels().vector_add[min(blocks, math.ceil(out.size / threads)), threads](a, b, out)


def saxpy(alpha: float, x: Any, y: Any, out: Any) -> None:
    """``out = alpha·x + y`` for float32 device arrays."""
    x, y, out = _check("saxpy", {"x": x, "y": y, "out": out}, ("float32",))
    if not math.isfinite(float(alpha)):
        raise WorkloadError(f"saxpy: alpha={alpha!r} is not finite", hint="pass a finite float")
    if out.size == 0:
        return
    blocks, threads = _stream_grid_cap()
    _kernels().saxpy[min(blocks, math.ceil(out.size / threads)), threads](np.float32(alpha), x, y, out)


def _frame_args(name: str, out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> tuple[Any, ...]:
    (out,) = _check(name, {"out": out}, ("int32",), ndim=2)
    height, width = out.shape
    return (out, *launch_scalars(int(height), int(width), x0, x1, y0, y1, max_iter))


def mandelbrot_naive(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """The straightforward float32 kernel: one pixel per thread, 16 × 16 blocks (x = column), into int32 ``out``."""
    args = _frame_args("mandelbrot_naive", out, x0, x1, y0, y1, max_iter)
    height, width = args[0].shape
    bx, by = NAIVE_BLOCK
    _kernels().mandel_naive[(math.ceil(width / bx), math.ceil(height / by)), NAIVE_BLOCK](*args)


def mandelbrot(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """Same counts as ``mandelbrot_naive``, with less work: bulb test, escape checked per 8 steps, 8 × 4 warp tiles."""
    args = _frame_args("mandelbrot", out, x0, x1, y0, y1, max_iter)
    height, width = args[0].shape
    tw, th = MANDEL_TILE
    _kernels().mandel[(math.ceil(width / tw), math.ceil(height / th)), THREADS](*args)
