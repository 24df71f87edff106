"""The Mandelbrot frame as the float32 kernels see it, and the argument checks every kernel module shares.

Every float32 kernel (CUDA C, Numba CUDA, Triton, and the float32 numpy emulation in :mod:`.cpu`) gets the same four
float32 numbers and computes a pixel's coordinate the same way, ``x = fma(float32(c), dx, x0)`` (one rounding), so
that their counts can be compared bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpukit.errors import WorkloadError

__all__ = ["Frame", "check_frame", "frame_f32", "launch_scalars"]

# Counts are int32 and kernels keep the iteration counter in 32 bits.
MAX_ITER_LIMIT = 2**31 - 1
# The GPU kernels put rows on the grid's y axis (at most 65,535 blocks) with 8 rows per block.
MAX_HEIGHT = 65_535 * 8
MAX_WIDTH = 2**24 - 1  # column indices are converted to float32 exactly


@dataclass(frozen=True)
class Frame:
    """float32-exact frame parameters: pixel (r, c) sits at (x0 + c·dx, y0 + r·dy)."""

    x0: float
    dx: float
    y0: float
    dy: float


def _f32(value: float) -> float:
    return float(np.float32(value))


def frame_f32(height: int, width: int, x0: float, x1: float, y0: float, y1: float) -> Frame:
    """Round the frame to float32 once, on the host, the same way for every kernel (steps computed in float64)."""
    return Frame(x0=_f32(x0), dx=_f32((x1 - x0) / width), y0=_f32(y0), dy=_f32((y1 - y0) / height))


def check_frame(height: int, width: int, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """Raise :class:`WorkloadError` for a frame no kernel can compute."""
    if height <= 0 or width <= 0:
        raise WorkloadError(
            f"mandelbrot: image shape ({height}, {width}) is empty",
            hint="pass an output array of shape (height, width) with both sides ≥ 1",
        )
    if height > MAX_HEIGHT or width > MAX_WIDTH:
        raise WorkloadError(
            f"mandelbrot: image shape ({height}, {width}) is too large for the kernels' grid",
            hint=f"keep height ≤ {MAX_HEIGHT:,} and width ≤ {MAX_WIDTH:,}",
        )
    bounds = (x0, x1, y0, y1)
    if not all(math.isfinite(float(v)) for v in bounds):
        raise WorkloadError(f"mandelbrot: frame bounds {bounds} must be finite", hint="pass finite x0, x1, y0, y1")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or not 0 <= int(max_iter) <= MAX_ITER_LIMIT:
        raise WorkloadError(
            f"mandelbrot: max_iter={max_iter!r} must be an integer in [0, {MAX_ITER_LIMIT}]",
            hint="pass a non-negative iteration limit, e.g. 1000",
        )


@lru_cache(maxsize=128)
def launch_scalars(
    height: int, width: int, x0: float, x1: float, y0: float, y1: float, max_iter: int
) -> tuple[np.float32, np.float32, np.float32, np.float32, np.int32]:
    """Checked ``(x0, dx, y0, dy, max_iter)`` as the numpy scalars a kernel launch takes, computed once per frame.

    Cached because it sits on the launch path: at the seed's 20 iterations a kernel runs for microseconds.
    """
    check_frame(height, width, x0, x1, y0, y1, max_iter)
    f = frame_f32(height, width, x0, x1, y0, y1)
    return np.float32(f.x0), np.float32(f.dx), np.float32(f.y0), np.float32(f.dy), np.int32(max_iter)
