"""Triton kernels on torch tensors: CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1`` (the tests).

Each function checks its inputs, launches on torch's current stream and returns None; the kernels live in
``_triton_jit.py`` (imported on first use, so a missing triton costs only this backend).
"""

from __future__ import annotations

import math
import os
from types import ModuleType
from typing import Any

import numpy as np

from gpukit.bench.kernels.frame import check_frame, frame_f32
from gpukit.errors import BackendUnavailable, WorkloadError

__all__ = ["MANDEL_CONFIG", "STREAM_CONFIG", "mandelbrot", "saxpy", "vector_add"]

INSTALL_HINT = "pip install triton (Linux; the CUDA builds of torch ship a matching one)"

# Streaming kernels: 2048 elements per program with 4 warps = 16 per thread, four 16-byte loads per operand in
# flight per thread; the tutorial's 1024/4 measured 4,343 GB/s on an H200 (MEASURING.md), this keeps its shape.
STREAM_CONFIG = {"BLOCK": 2048, "num_warps": 4}
# Mandelbrot: 8 x 8 pixels per program on 2 warps (one pixel per thread, 32 programs = 2048 threads per SM); a
# small program stops soon after its own last pixel escapes. UNROLL steps between the program-wide "any alive?"
# reductions. enable_fp_fusion=False keeps the compiler from fusing mul+add into FMAs the naive kernel lacks.
MANDEL_CONFIG = {"BH": 8, "BW": 8, "UNROLL": 8, "num_warps": 2}


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _jit() -> ModuleType:
    try:
        from gpukit.bench.kernels import _triton_jit
    except ImportError as exc:
        raise BackendUnavailable(f"triton is not importable: {exc}", hint=INSTALL_HINT) from exc
    return _triton_jit


def _torch() -> ModuleType:
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailable(f"torch is not importable: {exc}", hint="pip install 'gpukit[torch]'") from exc
    return torch


def _check(name: str, tensors: dict[str, Any], dtypes: tuple[str, ...], ndim: int | None = None) -> None:
    """Torch tensors of one allowed dtype and shape, contiguous, on the current CUDA device (CPU if interpreted)."""
    torch = _torch()
    first = next(iter(tensors.values()))
    for label, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise WorkloadError(f"{name}: {label} is a {type(t).__name__}, not a torch tensor", hint="torch.as_tensor")
        if str(t.dtype).removeprefix("torch.") not in dtypes or t.dtype != first.dtype:
            raise WorkloadError(
                f"{name}: {label} has dtype {t.dtype}; all operands must share one of {', '.join(dtypes)}",
                hint="convert with t.to(dtype)",
            )
        if t.shape != first.shape or (ndim is not None and t.dim() != ndim):
            raise WorkloadError(f"{name}: {label} has shape {tuple(t.shape)}", hint="pass tensors of one shape")
        if not t.is_contiguous():
            raise WorkloadError(f"{name}: {label} is not contiguous", hint="pass t.contiguous()")
        _check_device(name, label, t, torch)


def _check_device(name: str, label: str, t: Any, torch: Any) -> None:
    if _interpret():
        if t.device.type != "cpu":
            raise WorkloadError(f"{name}: {label} is on {t.device} under TRITON_INTERPRET", hint="use CPU tensors")
        return
    if t.device.type != "cuda":
        raise WorkloadError(
            f"{name}: {label} is on {t.device}; Triton kernels run on CUDA tensors",
            hint="move it with t.cuda() (or set TRITON_INTERPRET=1 to interpret on the CPU)",
        )
    current = torch.cuda.current_device()
    if t.device.index != current:
        raise WorkloadError(
            f"{name}: {label} is on {t.device}, the current device is cuda:{current}",
            hint=f"call it inside `with torch.cuda.device({t.device.index}):`",
        )


def vector_add(a: Any, b: Any, out: Any) -> None:
    """``out = a + b`` for int32 or float32 tensors."""
    _check("vector_add", {"a": a, "b": b, "out": out}, ("int32", "float32"))
    n = out.numel()
    if n == 0:
        return
    block, warps = STREAM_CONFIG["BLOCK"], STREAM_CONFIG["num_warps"]
    _jit().vector_add_kernel[(math.ceil(n / block),)](a, b, out, n, BLOCK=block, num_warps=warps)


def saxpy(alpha: float, x: Any, y: Any, out: Any) -> None:
    """``out = alpha·x + y`` for float32 tensors."""
    _check("saxpy", {"x": x, "y": y, "out": out}, ("float32",))
    if not math.isfinite(float(alpha)):
        raise WorkloadError(f"saxpy: alpha={alpha!r} is not finite", hint="pass a finite float")
    n = out.numel()
    if n == 0:
        return
    block, warps = STREAM_CONFIG["BLOCK"], STREAM_CONFIG["num_warps"]
    a32 = float(np.float32(alpha))  # triton passes Python floats as fp32: round once here, visibly
    _jit().saxpy_kernel[(math.ceil(n / block),)](a32, x, y, out, n, BLOCK=block, num_warps=warps)


def mandelbrot(out: Any, x0: float, x1: float, y0: float, y1: float, max_iter: int) -> None:
    """Escape counts of the frame into a contiguous int32 tensor ``out`` of shape (height, width)."""
    _check("mandelbrot", {"out": out}, ("int32",), ndim=2)
    height, width = (int(s) for s in out.shape)
    check_frame(height, width, x0, x1, y0, y1, max_iter)
    f = frame_f32(height, width, x0, x1, y0, y1)
    cfg = MANDEL_CONFIG
    grid = (math.ceil(width / cfg["BW"]), math.ceil(height / cfg["BH"]))
    _jit().mandelbrot_kernel[grid](
        out, height, width, f.x0, f.dx, f.y0, f.dy, int(max_iter),
        BH=cfg["BH"], BW=cfg["BW"], UNROLL=cfg["UNROLL"], num_warps=cfg["num_warps"], enable_fp_fusion=False,
    )  # fmt: skip
