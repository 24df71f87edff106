"""CuPy: array expressions and RawKernels compiled from CUDA C source, timed with CUDA events."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from gpukit.bench.backends.base import Availability, Backend
from gpukit.bench.timing import Clock, EventClock, make_pad

__all__ = ["CupyBackend"]

CUPY_HINT = "pip install cupy-cuda12x  (cupy-cuda13x for a CUDA 13 driver)"


class CupyBackend(Backend):
    name = "cupy"
    device = "cuda"
    has_transfers = True

    def availability(self) -> Availability:
        try:
            import cupy
        except ImportError as exc:
            return Availability(False, f"cupy is not installed ({exc})", CUPY_HINT)
        except Exception as exc:  # a CuPy built for another CUDA fails at import with a CUDA error
            return Availability(False, f"cupy does not load ({exc})", CUPY_HINT)
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            return Availability(False, f"no CUDA device for cupy ({exc})", "check the NVIDIA driver: gpukit doctor")
        if count < 1:
            return Availability(False, "no CUDA device for cupy", "check the NVIDIA driver: gpukit doctor")
        return Availability(True, version=cupy.__version__)

    def to_device(self, host: np.ndarray) -> Any:
        import cupy

        return cupy.asarray(host)

    def to_host(self, x: Any) -> np.ndarray:
        import cupy

        return cupy.asnumpy(x)  # blocking copy

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        import cupy

        return cupy.empty(shape, dtype=dtype)

    def synchronize(self) -> None:
        import cupy

        cupy.cuda.Device().synchronize()

    def clock(self) -> Clock:
        import cupy

        return EventClock(cupy.cuda.Event, lambda s, e: cupy.cuda.get_elapsed_time(s, e) / 1e3)

    def pad(self) -> Callable[[float], None] | None:
        import cupy

        return _cupy_pad(int(cupy.cuda.runtime.getDevice()))

    def release(self) -> None:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()

    def free_memory_bytes(self) -> int | None:
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])


@cache
def _cupy_pad(device_id: int) -> Callable[[float], None]:
    """gpukit's CUDA C spin kernel (kernels.cu: gpukit_spin, SM cycles), calibrated once per GPU."""
    import cupy

    from gpukit.bench.kernels import cuda_c

    clock = EventClock(cupy.cuda.Event, lambda s, e: cupy.cuda.get_elapsed_time(s, e) / 1e3)
    return make_pad(cuda_c.spin, clock, 1_000_000)
