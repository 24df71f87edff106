"""PyTorch backends (CPU and CUDA) and Triton, which runs on torch tensors.

Under ``TRITON_INTERPRET=1`` Triton kernels run in its interpreter on CPU tensors; the backend then reports device
"cpu" (the numbers are the interpreter's, useful only to test correctness).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from gpukit.bench.backends.base import Availability, Backend
from gpukit.bench.timing import Clock, EventClock, HostClock, make_pad

__all__ = ["TorchCpuBackend", "TorchCudaBackend", "TorchPageableOutBackend", "TorchPinnedOutBackend", "TritonBackend"]

TORCH_HINT = "pip install -e '.[torch]'  (or pip install torch)"


def _torch_availability(cuda: bool) -> Availability:
    try:
        import torch
    except ImportError as exc:
        return Availability(False, f"torch is not installed ({exc})", TORCH_HINT)
    if cuda and not torch.cuda.is_available():
        return Availability(False, "no CUDA device visible to torch", "run on a machine with an NVIDIA GPU and driver")
    return Availability(True, version=torch.__version__)


class TorchCpuBackend(Backend):
    name = "torch-cpu"
    device = "cpu"
    has_transfers = False

    def availability(self) -> Availability:
        return _torch_availability(cuda=False)

    def to_device(self, host: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.array(host))  # own copy: rotated sets must be distinct buffers

    def to_host(self, x: Any) -> np.ndarray:
        return x.numpy()

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype))

    def fill(self, x: Any, value: float | int) -> None:
        x.fill_(value)


class TorchCudaBackend(Backend):
    name = "torch-cuda"
    device = "cuda"
    has_transfers = True

    def availability(self) -> Availability:
        return _torch_availability(cuda=True)

    def to_device(self, host: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(host).to(self.device)  # pageable host memory, as a user's array would be

    def to_host(self, x: Any) -> np.ndarray:
        return x.cpu().numpy()  # blocking copy: returns a finished array

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=self.device)

    def fill(self, x: Any, value: float | int) -> None:
        x.fill_(value)

    def synchronize(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()

    def clock(self) -> Clock:
        if self.device != "cuda":
            return HostClock(self.synchronize)
        import torch

        return EventClock(lambda: torch.cuda.Event(enable_timing=True), lambda s, e: s.elapsed_time(e) / 1e3)

    def pad(self) -> Callable[[float], None] | None:
        if self.device != "cuda":
            return None
        import torch

        return _torch_pad(torch.cuda.current_device())

    def release(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.empty_cache()

    def free_memory_bytes(self) -> int | None:
        import torch

        return int(torch.cuda.mem_get_info()[0]) if self.device == "cuda" else None


class TritonBackend(TorchCudaBackend):
    name = "triton"

    def __init__(self) -> None:
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self.device = "cpu" if self.interpret else "cuda"
        self.has_transfers = not self.interpret

    def availability(self) -> Availability:
        base = _torch_availability(cuda=not self.interpret)
        if not base.ok:
            return base
        try:
            import triton
        except ImportError as exc:
            return Availability(False, f"triton is not installed ({exc})", "pip install triton")
        return Availability(True, version=triton.__version__)


class TorchHostOutBackend(TorchCudaBackend):
    """CUDA inputs, output in host memory: times device→host copies with CUDA events (bandwidth workload only).

    ``pinned`` selects page-locked host memory (DMA straight into it) or ordinary pageable memory (staged by the
    driver through a pinned bounce buffer)."""

    pinned = True

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), pin_memory=self.pinned)

    def to_host(self, x: Any) -> np.ndarray:
        self.synchronize()  # sync: the copy into this host buffer may still be in flight
        return x.numpy()

    def fill(self, x: Any, value: float | int) -> None:
        x.fill_(value)


class TorchPinnedOutBackend(TorchHostOutBackend):
    name = "torch-d2h-pinned"
    pinned = True


class TorchPageableOutBackend(TorchHostOutBackend):
    name = "torch-d2h-pageable"
    pinned = False


@cache
def _torch_pad(device_index: int) -> Callable[[float], None]:
    """torch's own spin kernel (``torch.cuda._sleep``, SM cycles) on the current stream, calibrated once per GPU."""
    import torch

    clock = EventClock(lambda: torch.cuda.Event(enable_timing=True), lambda s, e: s.elapsed_time(e) / 1e3)
    return make_pad(torch.cuda._sleep, clock, 1_000_000)
