"""A per-call watchdog: an implementation that sleeps or hangs on the host becomes a ``failed: timed out`` row and
the run goes on (`gpukit bench --call-timeout`).

It is SIGALRM through ``signal.setitimer``: the handler raises :class:`CallTimeout` in the main thread at the next
Python bytecode. What it cannot stop: a call blocked inside native code that never returns to Python (a kernel
that spins forever on the device and the synchronize waiting for it; a C extension in an endless loop). Off the
main thread, or where SIGALRM does not exist, there is no watchdog. A timer set by someone else (pytest-timeout)
is put back, with the time it had left, when the watched region ends.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The longest one call may take (first calls compile: Numba and Triton take ~1 s; a pure-Python Mandelbrot frame a
# few). The timed phase may take its budget plus this.
CALL_TIMEOUT_S = 120.0

__all__ = ["CallTimeout", "watch"]


class CallTimeout(BaseException):
    """Raised inside a watched region that ran past its time. A BaseException, so an implementation's own
    ``except Exception`` cannot swallow it."""

    def __init__(self, seconds: float, what: str) -> None:
        super().__init__(f"timed out: {what} did not return within {seconds:g} s")
        self.seconds = seconds


@contextmanager
def watch(seconds: float | None, what: str = "a call") -> Iterator[None]:
    """Raise :class:`CallTimeout` if the body runs longer than ``seconds`` (None or ≤ 0: no watchdog)."""
    usable = (
        seconds is not None
        and seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield
        return
    assert seconds is not None

    def fire(signum: int, frame: Any) -> None:
        raise CallTimeout(seconds, what)

    previous = signal.signal(signal.SIGALRM, fire)
    t0 = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_delay > 0:  # someone else's timer: give it back what it had left
            signal.setitimer(signal.ITIMER_REAL, max(old_delay - (time.monotonic() - t0), 1e-3), old_interval)
