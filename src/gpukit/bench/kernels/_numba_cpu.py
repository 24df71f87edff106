"""The Numba ``parallel=True`` Mandelbrot kernel (own module: importing it imports numba, which cpu.py defers)."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import prange

__all__ = ["mandel_rows"]


# fastmath=False: no reassociation or contraction, so float32 results are reproducible op by op.
# cache=True: the compiled machine code is kept beside this file (or in NUMBA_CACHE_DIR), so only the first process
# pays the compile time.
@numba.njit(parallel=True, cache=True, fastmath=False)
def mandel_rows(
    out: np.ndarray, xs: np.ndarray, ys: np.ndarray, max_iter: int, zero: Any, two: Any, four: Any
) -> None:  # pragma: no cover - compiled by numba
    """Rows in parallel; ``zero``/``two``/``four`` carry the precision so literals do not promote float32 to 64."""
    height, width = out.shape
    for r in prange(height):
        ci = ys[r]
        for c in range(width):
            cr = xs[c]
            zr = zero
            zi = zero
            n = max_iter
            for i in range(max_iter):
                zr2 = zr * zr
                zi2 = zi * zi
                if zr2 + zi2 > four:
                    n = i
                    break
                zi = two * zr * zi + ci
                zr = zr2 - zi2 + cr
            out[r, c] = n
