"""mandelbrot: escape-time counts of a frame of the complex plane — the seed's second example.

Convention (shared with ``bench/kernels``): pixel (row r, col c) of a ``height × width`` frame is the point
x = x0 + c·(x1−x0)/width, y = y0 + r·(y1−y0)/height; z starts at 0 and z ← z² + (x + iy); the count is the number of
updates after which |z|² > 4 first holds, or ``max_iter`` if it never does within ``max_iter`` updates (so counts
lie in 1..max_iter). Output: int32 array (height, width).

Counted per call: the iterations actually performed (sum of the reference's counts) — that is what ``giter_per_s``
reports; ``flops`` ≈ 7 per iteration (3 multiplies, 4 adds/subs, not counting the compare); bytes = the output only.
It is compute-bound, so % of ceiling is null (no FP32 rate is measured in the same run; a datasheet figure would be
a guess about instruction mix).

Check. The float64 reference defines truth. A float32 kernel rounds the pixel coordinates and every iterate, and
near the set's boundary the orbit is chaotic, so some boundary pixels get different counts. Measured against the
float64 reference with a float32 twin of it (numba, same loop): seed frame 1536×1024×20 — 0 pixels differ;
1024²×200 — 0.15 % of pixels, relative L2 error of counts 0.85 %; 1024²×1000 and 2048²×1000 — 0.35 %, 1.9 %.
Thresholds, about 3× those: float32 passes with ≤ 1 % of pixels differing and relative L2 ≤ 5 %; float64 (which
differs from the reference only through FMA and operation order) with ≤ 0.1 % and ≤ 0.5 %. A kernel that is off by
one everywhere fails both (every pixel differs; relative error ≈ 1/mean count ≥ 10 % at the seed frame), and an
unwritten pixel keeps the poison (−1.2·10⁹) and blows the relative error up.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from gpukit.bench.workloads._common import calibrated_seconds_per_unit
from gpukit.bench.workloads.base import Implementation, Size, Workload, relative_error
from gpukit.errors import ConfigError

FRAME = (-2.0, 1.0, -1.0, 1.0)  # x0, x1, y0, y1: the seed's frame
SEED_FRAME = "1536x1024x20"
# compute dtype → (max fraction of pixels that differ, max relative L2 error of counts)
THRESHOLDS = {"float32": (0.01, 0.05), "float64": (0.001, 0.005)}


def parse_size(text: str) -> Size:
    """'WIDTHxHEIGHT[xMAX_ITER]' (default 20 iterations, the seed's) or 'seed' → Size."""
    t = SEED_FRAME if text.strip() in ("seed", "seed-frame") else text.strip().lower()
    m = re.fullmatch(r"(\d+)x(\d+)(?:x(\d+))?", t)
    if not m:
        raise ConfigError(f"bad mandelbrot size '{text}'", hint="use WIDTHxHEIGHTxITERATIONS, e.g. 4096x4096x1000")
    w, h, it = int(m.group(1)), int(m.group(2)), int(m.group(3) or 20)
    if min(w, h, it) < 1:
        raise ConfigError(f"bad mandelbrot size '{text}'", hint="width, height and iterations must be >= 1")
    return Size(f"{w}x{h}x{it}", {"width": w, "height": h, "max_iter": it}, magnitude=float(w * h * it))


def sizes(quick: bool) -> list[Size]:
    if quick:  # 512² at 200 iterations: a quarter of 1024²'s CPU time (NumPy, torch-cpu, numba-cpu: ~7 s of 40 there)
        return [parse_size(SEED_FRAME), parse_size("512x512x200")]
    return [parse_size(SEED_FRAME), parse_size("4096x4096x1000")]


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    x0, x1, y0, y1 = FRAME
    return {"x0": x0, "x1": x1, "y0": y0, "y1": y1, "max_iter": size["max_iter"]}


def reference(size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    """float64 counts, computed by a loop written independently of every implementation under test."""
    from gpukit.bench.workloads._numba_cpu import mandelbrot_reference

    out = np.empty((size["height"], size["width"]), dtype=np.int32)
    mandelbrot_reference(out, inputs["x0"], inputs["x1"], inputs["y0"], inputs["y1"], inputs["max_iter"])
    return out


def check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
    if out.shape != ref.shape:
        return False, float("inf")
    max_frac, max_rel = THRESHOLDS.get(str(size.get("compute_dtype") or "float32"), THRESHOLDS["float32"])
    err = relative_error(out, ref)
    frac = float(np.mean(out != ref))
    return (err <= max_rel and frac <= max_frac), err


def _frame_args(inputs: Mapping[str, Any]) -> tuple[float, float, float, float, int]:
    return inputs["x0"], inputs["x1"], inputs["y0"], inputs["y1"], inputs["max_iter"]


# ---- implementations -------------------------------------------------------------------------------------------


def _python(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cpu

    cpu.mandelbrot_python(out, *_frame_args(inputs))


def _numba_cpu(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cpu

    cpu.mandelbrot_numba_parallel(out, *_frame_args(inputs), dtype=np.float32)  # the GPU kernels' precision


def _numpy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    """Vectorised float64: iterate only the points still inside (compaction), record escapes as they happen."""
    x0, x1, y0, y1, max_iter = _frame_args(inputs)
    h, w = out.shape
    cr = np.broadcast_to(x0 + np.arange(w) * ((x1 - x0) / w), (h, w)).ravel()
    ci = np.broadcast_to((y0 + np.arange(h) * ((y1 - y0) / h))[:, None], (h, w)).ravel()
    flat = out.reshape(-1)
    flat[:] = max_iter
    idx = np.arange(h * w)
    zr = np.zeros(h * w)
    zi = np.zeros(h * w)
    for n in range(1, max_iter + 1):
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        esc = zr * zr + zi * zi > 4.0
        if esc.any():
            flat[idx[esc]] = n
            keep = ~esc
            idx, zr, zi, cr, ci = idx[keep], zr[keep], zi[keep], cr[keep], ci[keep]
            if idx.size == 0:
                break


def _torch(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    """Vectorised float32 on torch tensors (CPU or CUDA): every pixel iterates; escapes are masked in."""
    import torch

    x0, x1, y0, y1, max_iter = _frame_args(inputs)
    h, w = out.shape
    f32 = dict(dtype=torch.float32, device=out.device)
    cr = (x0 + torch.arange(w, **f32) * ((x1 - x0) / w)).expand(h, w)  # type: ignore[arg-type]
    ci = (y0 + torch.arange(h, **f32) * ((y1 - y0) / h))[:, None].expand(h, w)  # type: ignore[arg-type]
    zr = torch.zeros((h, w), **f32)  # type: ignore[arg-type]
    zi = torch.zeros((h, w), **f32)  # type: ignore[arg-type]
    active = torch.ones((h, w), dtype=torch.bool, device=out.device)
    out.fill_(max_iter)
    for n in range(1, max_iter + 1):
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        esc = (zr * zr + zi * zi > 4.0) & active
        out.masked_fill_(esc, n)
        active &= ~esc
        zr = torch.where(active, zr, 0.0)  # escaped orbits would overflow to inf/nan; park them at 0
        zi = torch.where(active, zi, 0.0)


def _cuda_c(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cuda_c

    cuda_c.mandelbrot(out, *_frame_args(inputs))


def _cuda_c_naive(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import cuda_c

    cuda_c.mandelbrot_naive(out, *_frame_args(inputs))


def _triton(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import triton_kernels

    triton_kernels.mandelbrot(out, *_frame_args(inputs))


def _numba_cuda_naive(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import numba_cuda

    numba_cuda.mandelbrot_naive(out, *_frame_args(inputs))


def _numba_cuda(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.kernels import numba_cuda

    numba_cuda.mandelbrot(out, *_frame_args(inputs))


def _estimator(
    key: str, fn: Callable[[Mapping[str, Any], Any, Size], None], backend: str, max_px: int, linear: bool = False
) -> Any:
    """Seconds per call, from a timed call on the same frame at reduced resolution (same iterations), scaled by the
    pixel ratio. Cost follows the escape statistics, which a coarser grid of the same frame keeps.

    ``linear``: array-expression backends (NumPy, PyTorch) pay a fixed cost per operation — tens of operations per
    iteration, whatever the frame — which a small frame's time is mostly made of: scaling it by the pixel ratio
    estimated 69 s for a torch-cpu call that takes 0.2-2.7 s (Numba's parallel launch is such a fixed cost too: 6.6×
    too high). Those time two frames (from ¼ and all of ``max_px``) and
    extrapolate the line through them (fixed cost plus per-pixel cost), growing the frames until the per-pixel
    part shows."""

    def per_call(w: int, h: int, it: int, px: int) -> tuple[float, int]:
        k = max(1, math.ceil(math.sqrt(w * h / px)))
        small = parse_size(f"{max(1, w // k)}x{max(1, h // k)}x{it}")
        from gpukit.bench.backends import get_backend

        b = get_backend(backend)
        out = b.poisoned((small["height"], small["width"]), "int32")
        inputs = make_inputs(small, np.random.default_rng(0))

        def timed() -> None:
            # untimed warm-up: imports and first-call costs, and a frame above torch's parallel grain (32,768
            # elements) so its thread pool starts here, not inside a timed call
            for warm in (f"8x8x{it}", "256x256x2"):
                tiny = parse_size(warm)
                fn(
                    make_inputs(tiny, np.random.default_rng(0)),
                    b.poisoned((tiny["height"], tiny["width"]), "int32"),
                    tiny,
                )

        n = small["width"] * small["height"]
        per_px = calibrated_seconds_per_unit(f"mandelbrot:{key}:{small.label}", lambda: fn(inputs, out, small), n,
                                             warm=timed)  # fmt: skip
        return per_px * n, n

    def estimate(size: Size) -> float:
        w, h, it = size["width"], size["height"], size["max_iter"]
        if not linear:
            t1, n1 = per_call(w, h, it, max_px)
            return t1 / n1 * w * h
        # Grow the calibration frame 4× at a time until the per-pixel cost shows (the time grows ≥ 2.5× with the
        # pixels), a call takes half a second, or the frame is half the real one; extrapolate the last two points.
        t0, n0 = per_call(w, h, it, max(max_px // 4, 64))
        px = max_px
        while True:
            t1, n1 = per_call(w, h, it, px)
            if n1 <= n0 or t1 >= 2.5 * t0 or t1 >= 0.5 or 2 * n1 >= w * h:
                break
            t0, n0, px = t1, n1, px * 4
        if n1 <= n0:
            return t1 / n1 * w * h
        # A fixed cost is never negative, so the per-pixel cost is at most either frame's average. A slope above
        # that is noise, not cost: on a loaded machine torch's CPU threads stall per operation (a few ms each,
        # whatever the frame), and a stall in the larger frame alone, extrapolated, made a 1 s call "26 s".
        slope = min(max((t1 - t0) / (n1 - n0), 0.0), t0 / n0, t1 / n1)
        return max(t1 - slope * n1, 0.0) + slope * w * h

    return estimate


WORKLOAD = Workload(
    name="mandelbrot",
    description="escape-time counts over x∈[-2,1], y∈[-1,1] (the seed's frame is 1536x1024x20)",
    unit="giter_per_s",
    sizes=sizes,
    parse_size=parse_size,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    output_spec=lambda size: ((size["height"], size["width"]), "int32"),
    flops=lambda size: 7.0 * size["width"] * size["height"] * size["max_iter"],  # upper bound; amount is exact
    bytes=lambda size: 4.0 * size["width"] * size["height"],
    amount=lambda size, ref: float(ref.sum(dtype=np.int64)),
    ceiling=None,
    dtype_of=lambda size: None,
    tolerance=lambda size: THRESHOLDS.get(str(size.get("compute_dtype") or "float32"), THRESHOLDS["float32"])[1],
    implementations={
        "python": Implementation(
            "python",
            _python,
            estimate_s=_estimator("python", _python, "python", 4096),
            dtype="float64",
            note="the seed's per-pixel loops",
        ),
        "numpy": Implementation(
            "numpy",
            _numpy,
            estimate_s=_estimator("numpy", _numpy, "numpy", 65536, linear=True),
            dtype="float64",
            note="vectorised with compaction",
        ),
        "numba-cpu": Implementation(
            "numba-cpu",
            _numba_cpu,
            estimate_s=_estimator("numba-cpu", _numba_cpu, "numba-cpu", 65536, linear=True),
            dtype="float32",
            note="@njit(parallel=True)",
        ),
        "torch-cpu": Implementation(
            "torch-cpu",
            _torch,
            estimate_s=_estimator("torch", _torch, "torch-cpu", 65536, linear=True),
            dtype="float32",
            note="vectorised, masked",
        ),
        "torch-cuda": Implementation("torch-cuda", _torch, dtype="float32", note="vectorised, masked"),
        "cupy-cuda-c": Implementation("cupy", _cuda_c, dtype="float32", note="RawKernel"),
        "cupy-cuda-c-naive": Implementation("cupy", _cuda_c_naive, dtype="float32", note="RawKernel, one pixel/thread"),
        "triton": Implementation("triton", _triton, dtype="float32"),
        "numba-cuda-naive": Implementation(
            "numba-cuda", _numba_cuda_naive, dtype="float32", note="one pixel per thread, 16×16 blocks (baseline)"
        ),
        "numba-cuda": Implementation("numba-cuda", _numba_cuda, dtype="float32", note="optimised"),
    },
)
