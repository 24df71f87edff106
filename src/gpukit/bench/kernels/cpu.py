"""CPU kernels and the references: the seed's pure-Python loops, Numba ``parallel=True``, and numpy truth.

``mandelbrot_reference`` is what the bench checks every Mandelbrot kernel against. In float64 (the default) it is
the independent truth; with ``dtype=np.float32`` it reproduces, bit for bit, the float32 arithmetic every GPU kernel
in this package uses (coordinates and the ``zi`` update through one fused multiply-add, everything else rounded op
by op), so a GPU kernel can be checked for exact equality, not only "close to float64".
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence, Sequence
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from gpukit.bench.kernels.frame import check_frame, frame_f32
from gpukit.errors import WorkloadError

__all__ = [
    "fma_f32",
    "mandelbrot_numba_parallel",
    "mandelbrot_python",
    "mandelbrot_reference",
    "saxpy_python",
    "vector_add_python",
]

F32 = np.float32
F64 = np.float64


# ---------------------------------------------------------------- references


def fma_f32(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike) -> np.ndarray:
    """Exact float32 fused multiply-add ``round32(a·b + c)`` for float32 inputs, in numpy.

    ``a·b`` is exact in float64 (24 + 24 significant bits); the sum is rounded to float64 *to odd* (TwoSum gives the
    error, a nudge of one ulp makes the last bit sticky), after which rounding to float32 is correct: 53 ≥ 24 + 2.
    """
    p = np.asarray(a, F32).astype(F64) * np.asarray(b, F32).astype(F64)
    c64 = np.asarray(c, F32).astype(F64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    even = (s.view(np.int64) & 1) == 0
    nudge = (err != 0) & even
    if np.any(nudge):
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


def _coords(
    height: int, width: int, x0: float, x1: float, y0: float, y1: float, dtype: type, rows: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Column x values and row y values, the way the kernels of that precision compute them."""
    cols = np.arange(width)
    rws = np.arange(rows[0], rows[1])
    if dtype is F64:
        return x0 + cols * ((x1 - x0) / width), y0 + rws * ((y1 - y0) / height)
    f = frame_f32(height, width, x0, x1, y0, y1)
    xs = fma_f32(cols.astype(F32), np.full(width, f.dx, F32), np.full(width, f.x0, F32))
    ys = fma_f32(rws.astype(F32), np.full(rws.size, f.dy, F32), np.full(rws.size, f.y0, F32))
    return xs, ys


def _escape_counts(cr: np.ndarray, ci: np.ndarray, max_iter: int, fused: bool) -> np.ndarray:
    """Escaped-mask iteration over flat arrays; points leave the working set the step they escape."""
    counts = np.full(cr.shape, max_iter, dtype=np.int32)
    idx = np.arange(cr.size)
    zr = np.zeros_like(cr)
    zi = np.zeros_like(cr)
    for n in range(max_iter):
        zr2 = zr * zr
        zi2 = zi * zi
        esc = (zr2 + zi2) > 4
        if esc.any():
            counts[idx[esc]] = n
            keep = ~esc
            idx, zr, zi, zr2, zi2, cr, ci = (v[keep] for v in (idx, zr, zi, zr2, zi2, cr, ci))
            if idx.size == 0:
                break
        # zi ← 2·zr·zi + ci (one rounding on the GPU: fma(zr+zr, zi, ci)); zr ← (zr² − zi²) + cr
        zi = fma_f32(zr + zr, zi, ci) if fused else (zr + zr) * zi + ci
        zr = (zr2 - zi2) + cr
    return counts


def mandelbrot_reference(
    height: int,
    width: int,
    x0: float,
    x1: float,
    y0: float,
    y1: float,
    max_iter: int,
    *,
    dtype: type = np.float64,
    rows: tuple[int, int] | None = None,
) -> np.ndarray:
    """Escape counts as an int32 array ``(height, width)`` — or only ``rows=(start, stop)`` of that frame.

    ``dtype=np.float64`` (default): the independent truth. ``dtype=np.float32``: the GPU kernels' exact float32
    arithmetic, so a GPU result must match it pixel for pixel. Cost is one numpy pass per iteration over the points
    still inside: keep it to small frames or a few ``rows`` (4096² × 1000 takes minutes).
    """
    check_frame(height, width, x0, x1, y0, y1, max_iter)
    dt = np.dtype(dtype).type
    if dt not in (F32, F64):
        raise WorkloadError(f"mandelbrot_reference: dtype {dtype!r} unsupported", hint="use np.float64 or np.float32")
    span = (0, height) if rows is None else (int(rows[0]), int(rows[1]))
    if not 0 <= span[0] <= span[1] <= height:
        raise WorkloadError(f"mandelbrot_reference: rows {rows} outside [0, {height}]", hint="pass 0 ≤ start ≤ stop")
    xs, ys = _coords(height, width, x0, x1, y0, y1, dt, span)
    cr = np.broadcast_to(xs[None, :], (ys.size, width)).ravel().copy()
    ci = np.broadcast_to(ys[:, None], (ys.size, width)).ravel().copy()
    return _escape_counts(cr, ci, int(max_iter), fused=dt is F32).reshape(ys.size, width)


# ---------------------------------------------------------------- the seed's pure Python


def _escape_count_python(cr: float, ci: float, max_iter: int) -> int:
    zr = zi = 0.0
    for n in range(max_iter):
        zr2 = zr * zr
        zi2 = zi * zi
        if zr2 + zi2 > 4.0:
            return n
        zi = 2.0 * zr * zi + ci
        zr = zr2 - zi2 + cr
    return max_iter


def mandelbrot_python(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """The seed's per-pixel Python loops (float64), writing ``out[r][c]``: a numpy int32 array or a list of lists."""
    height = len(out)
    width = len(out[0]) if height else 0
    check_frame(height, width, x0, x1, y0, y1, max_iter)
    dx = (x1 - x0) / width
    dy = (y1 - y0) / height
    for r in range(height):
        ci = y0 + r * dy
        row = out[r]
        for c in range(width):
            row[c] = _escape_count_python(x0 + c * dx, ci, max_iter)


def _check_lengths(name: str, *seqs: Sequence[Any]) -> int:
    lengths = {len(s) for s in seqs}
    if len(lengths) != 1:
        raise WorkloadError(
            f"{name}: operand lengths differ ({', '.join(str(len(s)) for s in seqs)})",
            hint="pass inputs and output of the same length",
        )
    return lengths.pop()


def vector_add_python(a: Sequence[Any], b: Sequence[Any], out: MutableSequence[Any]) -> None:
    """``out[i] = a[i] + b[i]`` one element at a time, as the seed's sequential loop does."""
    n = _check_lengths("vector_add_python", a, b, out)
    for i in range(n):
        out[i] = a[i] + b[i]


def saxpy_python(alpha: float, x: Sequence[Any], y: Sequence[Any], out: MutableSequence[Any]) -> None:
    """``out[i] = alpha·x[i] + y[i]`` one element at a time."""
    n = _check_lengths("saxpy_python", x, y, out)
    for i in range(n):
        out[i] = alpha * x[i] + y[i]


# ---------------------------------------------------------------- Numba parallel on the CPU


@cache
def _numba_parallel_kernel() -> Callable[..., None]:
    try:
        from gpukit.bench.kernels import _numba_cpu
    except ImportError as exc:
        from gpukit.errors import BackendUnavailable

        raise BackendUnavailable(f"numba is not importable: {exc}", hint="pip install 'numba>=0.60,<0.70'") from exc
    return _numba_cpu.mandel_rows


def mandelbrot_numba_parallel(
    out: np.ndarray,
    x0: float,
    x1: float,
    y0: float,
    y1: float,
    max_iter: int,
    *,
    dtype: type | None = None,
) -> None:
    """Numba ``njit(parallel=True)``, ``prange`` over rows, into a C-contiguous int32 numpy array ``out``.

    Precision follows ``dtype`` (np.float64 or np.float32); left out, it is float32 when the frame bounds are numpy
    float32 values, float64 otherwise. The float32 path rounds every operation separately (no FMA), so it can differ
    from the GPU kernels at a few boundary pixels.
    """
    if not isinstance(out, np.ndarray) or out.dtype != np.int32 or out.ndim != 2 or not out.flags.c_contiguous:
        raise WorkloadError(
            "mandelbrot_numba_parallel: out must be a C-contiguous 2-D numpy int32 array",
            hint="allocate it with np.empty((height, width), dtype=np.int32)",
        )
    height, width = out.shape
    check_frame(height, width, x0, x1, y0, y1, max_iter)
    if dtype is None:
        dtype = F32 if any(isinstance(v, np.float32) for v in (x0, x1, y0, y1)) else F64
    dt = np.dtype(dtype).type
    if dt not in (F32, F64):
        raise WorkloadError(f"mandelbrot_numba_parallel: dtype {dtype!r} unsupported", hint="use float64 or float32")
    xs, ys = _coords(height, width, float(x0), float(x1), float(y0), float(y1), dt, (0, height))
    kernel = _numba_parallel_kernel()
    kernel(out, np.ascontiguousarray(xs, dt), np.ascontiguousarray(ys, dt), int(max_iter), dt(0), dt(2), dt(4))
