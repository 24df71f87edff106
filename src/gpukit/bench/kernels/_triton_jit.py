"""The Triton kernels themselves (own module: importing it imports triton, which triton_kernels.py defers).

Written as the triton tutorials write them: one program per BLOCK of elements, a mask for the ragged end.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["mandelbrot_kernel", "saxpy_kernel", "vector_add_kernel"]


@triton.jit
def vector_add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    # 64-bit offsets: a 1 GiB float32 operand already has 2^28 elements, and pid·BLOCK must not wrap beyond 2^31.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a + b, mask=mask)


@triton.jit
def saxpy_kernel(alpha, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@triton.jit
def _step(zr, zi, zr2, zi2, cx, cy):  # type: ignore[no-untyped-def]
    # The naive Numba kernel's arithmetic exactly (launched with enable_fp_fusion=False, so only this fma fuses).
    zi = tl.fma(zr + zr, zi, cy)
    zr = (zr2 - zi2) + cx
    return zr, zi, zr * zr, zi * zi


@triton.jit
def mandelbrot_kernel(  # type: ignore[no-untyped-def]
    out_ptr, height, width, x0, dx, y0, dy, max_iter, BH: tl.constexpr, BW: tl.constexpr, UNROLL: tl.constexpr
):
    rows = tl.program_id(1) * BH + tl.arange(0, BH)
    cols = tl.program_id(0) * BW + tl.arange(0, BW)
    zero = tl.zeros((BH, BW), dtype=tl.float32)
    cx = tl.fma(cols.to(tl.float32), dx, x0)[None, :] + zero
    cy = tl.fma(rows.to(tl.float32), dy, y0)[:, None] + zero

    # Main cardioid and period-2 bulb never escape (margin 1e-5 against float32 rounding; see kernels.cu).
    xm = cx - 0.25
    y2 = cy * cy
    q = xm * xm + y2
    xp = cx + 1.0
    inside = (q * (q + xm) <= 0.25 * y2 - 1e-5) | (xp * xp + y2 <= 0.0625 - 1e-5)

    # A lane counts the steps it has been alive; once |z|² > 4 (or NaN) it is dead for good, so the count is the
    # first escape step, as in the naive kernel. The program stops as soon as none of its lanes is alive (lanes
    # past the image's edge start dead, so they cannot keep it running).
    valid = (rows[:, None] < height) & (cols[None, :] < width)
    alive = tl.where(inside | ~valid, 0, 1)
    count = tl.where(inside, max_iter, 0)
    zr = zero
    zi = zero
    zr2 = zero
    zi2 = zero
    n = 0
    live = tl.max(alive, axis=None)
    while (n <= max_iter - UNROLL) & (live > 0):
        for _k in tl.static_range(UNROLL):
            alive = tl.where(zr2 + zi2 <= 4.0, alive, 0)
            count += alive
            zr, zi, zr2, zi2 = _step(zr, zi, zr2, zi2, cx, cy)
        n += UNROLL
        live = tl.max(alive, axis=None)
    for _i in range(n, tl.where(live > 0, max_iter, n)):  # the last < UNROLL steps, if a lane is still alive
        alive = tl.where(zr2 + zi2 <= 4.0, alive, 0)
        count += alive
        zr, zi, zr2, zi2 = _step(zr, zi, zr2, zi2, cx, cy)

    offs = rows.to(tl.int64)[:, None] * width + cols[None, :]
    tl.store(out_ptr + offs, count, mask=valid)
