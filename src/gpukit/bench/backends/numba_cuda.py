"""Numba CUDA (the numba-cuda package). Under ``NUMBA_ENABLE_CUDASIM=1`` kernels run in Numba's simulator on the
CPU: the backend then reports device "cpu" and a host clock (only correctness means anything there)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from gpukit.bench.backends.base import Availability, Backend, poison_value
from gpukit.bench.timing import Clock, EventClock, HostClock, make_pad

__all__ = ["NumbaCudaBackend"]

HINT = "pip install numba-cuda"


class _Event:
    """numba's event with the record()/synchronize() shape EventClock expects."""

    def __init__(self) -> None:
        from numba import cuda

        self.event = cuda.event(timing=True)  # type: ignore[call-arg]

    def record(self) -> None:
        self.event.record()

    def synchronize(self) -> None:
        self.event.synchronize()


class NumbaCudaBackend(Backend):
    name = "numba-cuda"

    def __init__(self) -> None:
        self.simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
        self.device = "cpu" if self.simulated else "cuda"
        self.has_transfers = not self.simulated

    def availability(self) -> Availability:
        if not self.simulated and (missing := _no_driver()) is not None:
            return Availability(False, missing, "run on a machine with an NVIDIA GPU and driver (gpukit doctor)")
        try:
            from numba import cuda
        except Exception as exc:
            return Availability(False, f"numba.cuda does not load ({exc})", HINT)
        if self.simulated:
            return Availability(True, version="simulator")
        try:
            ok = cuda.is_available()
        except Exception as exc:
            return Availability(False, f"numba cannot use CUDA ({exc})", HINT)
        if not ok:
            return Availability(False, "no CUDA device visible to numba", "check the driver: gpukit doctor; " + HINT)
        try:
            from importlib.metadata import version

            ver = version("numba-cuda")
        except Exception:
            ver = None
        return Availability(True, version=ver)

    def to_device(self, host: np.ndarray) -> Any:
        from numba import cuda

        return cuda.to_device(host)

    def to_host(self, x: Any) -> np.ndarray:
        return x.copy_to_host()  # blocking copy

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        from numba import cuda

        return cuda.device_array(shape, dtype=dtype)

    def poisoned(self, shape: tuple[int, ...], dtype: str) -> Any:
        from numba import cuda

        return cuda.to_device(np.full(shape, poison_value(dtype), dtype=dtype))

    def repoison(self, x: Any, dtype: str) -> Any:
        x.copy_to_device(np.full(x.shape, poison_value(dtype), dtype=dtype))  # device arrays have no fill
        return x

    def synchronize(self) -> None:
        from numba import cuda

        cuda.synchronize()

    def clock(self) -> Clock:
        if self.simulated:
            return HostClock(self.synchronize)
        return EventClock(_Event, lambda s, e: s.event.elapsed_time(e.event) / 1e3)

    def pad(self) -> Callable[[float], None] | None:
        return None if self.simulated else _numba_pad()

    def free_memory_bytes(self) -> int | None:
        if self.simulated:
            return None
        from numba import cuda

        return int(cuda.current_context().get_memory_info()[0])

    def release(self) -> None:
        if self.simulated:
            return
        from numba import cuda

        cuda.current_context().deallocations.clear()  # free what numba deferred, before the next result


@cache
def _no_driver() -> str | None:
    """Why numba could not find a CUDA driver here, found without importing numba.cuda (1 s of a 2-core --quick,
    only to learn there is no GPU): the driver library does not load. None where it loads, where numba is pointed
    at another one (``NUMBA_CUDA_DRIVER``) and off Linux — numba.cuda then decides."""
    if not sys.platform.startswith("linux") or os.environ.get("NUMBA_CUDA_DRIVER"):
        return None
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no CUDA device visible to numba: no CUDA driver ({str(exc).split(':')[0]} does not load)"
    return None


@cache
def _numba_pad() -> Callable[[float], None]:
    """A numba spin kernel (a chain of dependent multiply-adds), calibrated once per process."""
    from gpukit.bench.kernels import numba_cuda

    clock = EventClock(_Event, lambda s, e: s.event.elapsed_time(e.event) / 1e3)
    return make_pad(numba_cuda.spin, clock, 250_000)
