"""Numba CPU kernels for the element-wise workloads (``parallel=True`` over all cores; ``cache=True`` so the JIT
cost is paid once per machine — compile time is reported apart anyway). Imported only when first used."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

__all__ = ["copy", "mandelbrot_reference", "saxpy", "vector_add"]


@numba.njit(parallel=True, cache=True)
def vector_add(a: Any, b: Any, out: Any) -> None:  # pragma: no cover - compiled
    for i in numba.prange(out.shape[0]):
        out[i] = a[i] + b[i]


@numba.njit(parallel=True, cache=True)
def saxpy(alpha: Any, x: Any, y: Any, out: Any) -> None:  # pragma: no cover - compiled
    a = np.float32(alpha)
    for i in numba.prange(out.shape[0]):
        out[i] = a * x[i] + y[i]


@numba.njit(parallel=True, cache=True)
def copy(src: Any, dst: Any) -> None:  # pragma: no cover - compiled
    for i in numba.prange(dst.shape[0]):
        dst[i] = src[i]


@numba.njit(parallel=True, cache=True)
def mandelbrot_reference(
    out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int
) -> None:  # pragma: no cover
    """float64 escape-time counts: the truth every mandelbrot implementation is checked against."""
    h, w = out.shape
    dx = (x1 - x0) / w
    dy = (y1 - y0) / h
    for r in numba.prange(h):
        ci = y0 + r * dy
        for c in range(w):
            cr = x0 + c * dx
            zr = 0.0
            zi = 0.0
            n = 0
            while n < max_iter:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                n += 1
                if zr * zr + zi * zi > 4.0:
                    break
            out[r, c] = n
