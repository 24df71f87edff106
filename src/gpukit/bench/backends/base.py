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
