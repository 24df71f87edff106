"""The backend interface: how one way of computing moves data, allocates outputs, waits and is timed.

A backend is a small class; adding one is one module plus one line in ``backends/__init__.py``'s ``BACKENDS``.
Heavy imports (torch, cupy, numba.cuda, triton) happen inside the methods, never at module import, so a missing
package makes the backend *unavailable with the reason and the install command* and the run goes on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpukit.bench.timing import Clock, HostClock

__all__ = ["POISON_FLOAT", "POISON_INT", "Availability", "Backend", "poison_value"]

# Poison written into every output before an implementation runs: an element it does not write fails the check.
POISON_FLOAT = float("nan")
POISON_INT = -1_234_567_891  # fits int32; no workload here produces it


def poison_value(dtype: str) -> float | int:
    return POISON_INT if np.dtype(dtype).kind in "iu" else POISON_FLOAT


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here; when not, why (``reason``) and what to do (``hint``, e.g. an install cmd)."""

    ok: bool
    reason: str | None = None
    hint: str | None = None
    version: str | None = None


class Backend(ABC):
    """Moves NumPy host arrays to its device and back, allocates poisoned outputs, synchronizes and gives a clock.

    ``device`` is "cpu" or "cuda". ``to_device`` / ``to_host`` / ``synchronize`` are the only sync points the harness
    relies on: ``to_host`` returns a finished NumPy array; ``to_device`` may be asynchronous (the harness calls
    ``synchronize`` before reading its clock).
    """

    name: str = ""
    device: str = "cpu"
    has_transfers: bool = False  # True when data must cross to another memory (GPU); else h2d/d2h are 0

    @abstractmethod
    def availability(self) -> Availability:
        """Check (cheaply, once) whether this backend can run here."""

    def to_device(self, host: np.ndarray) -> Any:
        return host

    def to_host(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    @abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        """An uninitialised output buffer on the device."""

    def poisoned(self, shape: tuple[int, ...], dtype: str) -> Any:
        """An output buffer filled with :func:`poison_value` (NaN for floats, a sentinel for integers)."""
        out = self.empty(shape, dtype)
        self.fill(out, poison_value(dtype))
        return out

    def repoison(self, x: Any, dtype: str) -> Any:
        """``x`` (an output of :meth:`poisoned`) filled with the poison again, in place; returns it. The buffer the
        first call wrote is the one the timed calls get: an implementation that remembers which outputs it already
        wrote gets its own first buffer back, full of poison."""
        self.fill(x, poison_value(dtype))
        return x

    def fill(self, x: Any, value: float | int) -> None:
        x.fill(value)

    def synchronize(self) -> None:  # noqa: B027 - CPU backends have nothing to wait for
        """Block until all work queued on the device has finished (no-op on the CPU)."""

    def clock(self) -> Clock:
        """The clock kernels are timed with: host clock here; CUDA events on GPU backends."""
        return HostClock(self.synchronize)

    def pad(self) -> Callable[[float], None] | None:
        """``pad(seconds)`` queues about that long of device work ahead of a sample (``timing.make_pad``), so the
        timed calls are launched while the device is still busy; None where the clock waits for the device."""
        return None

    def transfer_clock(self) -> Clock:
        """The clock transfers are timed with: host clock with device syncs (includes the host side of a copy)."""
        return HostClock(self.synchronize)

    def release(self) -> None:  # noqa: B027 - most backends free by reference counting
        """Return cached device memory after a result (e.g. a memory pool), so the next one starts clean."""

    def free_memory_bytes(self) -> int | None:
        """Free device memory, to skip sizes that cannot fit (None: unknown / host memory)."""
        return None

    def same_bits_on_device(self, x: Any, host: np.ndarray, uploads: dict[int, Any]) -> bool | None:
        """Whether ``x`` holds exactly the bytes of ``host``, compared where ``x`` lives, so that a large output or
        input is not read back to be checked; None when that cannot be told here (the caller reads ``x`` back).
        ``uploads`` keeps the device copies of host arrays made for the comparison, by id, for the next one."""
        if self.device != "cuda":
            return None  # a host array is read back for free
        self.synchronize()  # sync: what was queued into ``x`` must have landed before it is compared
        return cuda_same_bits(x, host, uploads)

    def relative_error_on_device(self, x: Any, ref: np.ndarray, uploads: dict[int, Any]) -> float | None:
        """‖x − ref‖₂ / ‖ref‖₂ in float64, computed where ``x`` lives (None: the caller reads ``x`` back); the
        element-wise workloads' whole check reads only this (``workloads.base.RelativeErrorCheck``)."""
        if self.device != "cuda":
            return None
        self.synchronize()  # sync: what was queued into ``x`` must have landed before it is read
        return cuda_relative_error(x, ref, uploads)


def _on_cuda(x: Any, host: np.ndarray, uploads: dict[int, Any]) -> tuple[Any, Any] | None:
    """``x`` seen by torch as a contiguous CUDA tensor of ``host``'s shape, and ``host`` uploaded beside it (once:
    kept in ``uploads`` by id, with the array itself, since an id is unique only while its object lives); None when
    torch cannot see ``x`` so, or the device has no room for the copy."""
    import torch

    if not torch.cuda.is_available():
        return None
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)  # CuPy / Numba: __cuda_array_interface__, no copy
    if t.device.type != "cuda" or not t.is_contiguous() or tuple(t.shape) != host.shape:
        return None
    kept, ref = uploads.get(id(host), (None, None))
    if kept is not host or ref.device != t.device:
        if host.nbytes > 0.5 * torch.cuda.mem_get_info(t.device)[0]:
            return None
        ref = torch.from_numpy(np.ascontiguousarray(host)).to(t.device)
        uploads[id(host)] = (host, ref)
    return t, ref


def cuda_same_bits(x: Any, host: np.ndarray, uploads: dict[int, Any]) -> bool | None:
    """Byte-for-byte equality of a CUDA array (a torch tensor, or anything with ``__cuda_array_interface__``: CuPy,
    Numba) and a host array of the same dtype, by ``torch.equal`` on their bytes on the device (NaN payloads and
    signed zeros included). None when it cannot be told there (see :func:`_on_cuda`)."""
    try:
        import torch

        pair = _on_cuda(x, host, uploads)
        if pair is None or pair[0].dtype != pair[1].dtype:
            return None
        t, ref = pair
        return bool(torch.equal(t.reshape(-1).view(torch.uint8), ref.reshape(-1).view(torch.uint8)))
    except Exception:  # not an array torch can see on the device (a prepared object, a foreign pointer)
        return None


def cuda_relative_error(x: Any, ref_host: np.ndarray, uploads: dict[int, Any]) -> float | None:
    """‖x − ref‖₂ / ‖ref‖₂ in float64 on the device, as :func:`gpukit.bench.workloads.base.relative_error` forms it
    on the host (+inf for a non-finite element, 0 for two zero arrays), in chunks of 16 M elements so the float64
    temporaries stay small. None when it cannot be computed there (see :func:`_on_cuda`)."""
    try:
        import torch

        pair = _on_cuda(x, ref_host, uploads)
        if pair is None or pair[0].is_complex() or pair[1].is_complex():
            return None
        o, r = pair[0].reshape(-1), pair[1].reshape(-1)
        num = torch.zeros((), dtype=torch.float64, device=o.device)
        den = torch.zeros_like(num)
        finite = torch.ones((), dtype=torch.bool, device=o.device)
        step = 1 << 24
        for i in range(0, o.numel(), step):
            oc, rc = o[i : i + step].double(), r[i : i + step].double()
            finite &= torch.isfinite(oc).all()
            den += rc.dot(rc)
            oc -= rc
            num += oc.dot(oc)
        if not bool(finite):
            return float("inf")
        diff, denom = float(num.sqrt()), float(den.sqrt())
        if denom == 0.0:
            return 0.0 if diff == 0.0 else float("inf")
        return diff / denom
    except Exception:
        return None
