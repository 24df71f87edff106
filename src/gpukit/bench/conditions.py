"""The conditions each timed sample is taken under: a cold or hot cache, and a GPU that is not throttling.

**Cold and hot.** A *hot* sample finds its inputs wherever the previous call left them (a loop calling the same
function: the rows' default for throughput). A *cold* sample starts with the last-level cache evicted: before each
sample, untimed, a buffer twice the cache's size is written (the GPU's L2 from the CUDA driver, the CPU's last
level from sysfs: :func:`gpukit.hardware.state.cache_bytes`), and the sample is one call. ``auto`` is cold only
where the working set fits in that cache and the workload says a user calls it once (``Workload.called_once``),
hot elsewhere. On the CPU the flush is the same idea (write 2 × L3 from NumPy); where the cache size cannot be read
a row asked for cold is measured hot and says why.

**Throttling.** :class:`ThrottleGuard` reads the SM clock and the clock-event reasons before and after each
sample (two NVML calls each); a sample is discarded when the SM clock was below :data:`CLOCK_FLOOR` of the
application clock at either end with no power cap to explain it, or a thermal or power-brake slowdown was set.
NVML's ``sw_power_cap`` is not a slowdown: a GEMM at its power limit runs capped all the time, that is its speed,
and its clock may sit far below the floor (an H200 at its 700 W limit ran a bf16 GEMM at 1,290–1,620 MHz against a
1,980 MHz application clock: 65–82 %). A power limit set lower than the last run's is a difference in the GPU's
state, which every comparison checks (``bench.verdict``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "CACHE_MODES",
    "CLOCK_FLOOR",
    "SLOWDOWNS",
    "ThrottleGuard",
    "cache_state",
    "make_flush",
    "resolve_cache",
    "throttle_guard",
]

CACHE_MODES = ("auto", "hot", "cold")
CLOCK_FLOOR = 0.75  # of the application clock, as nvbench does
SLOWDOWNS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})


class _Reading(Protocol):
    @property
    def sm_clock_mhz(self) -> int | None: ...

    @property
    def reasons(self) -> tuple[str, ...]: ...


class _Reader(Protocol):
    app_clock_mhz: int | None

    def read(self) -> _Reading: ...


class ThrottleGuard:
    """A :class:`gpukit.bench.timing.Guard` over a clock reader (``hardware.state.ClockReader`` or a fake)."""

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader
        self._before: _Reading | None = None
        self.readings = 0

    def _why(self, r: _Reading) -> str | None:
        slow = sorted(SLOWDOWNS.intersection(r.reasons))
        if slow:
            return f"throttled: {', '.join(slow)}"
        app = self._reader.app_clock_mhz
        capped = "sw_power_cap" in r.reasons
        if app and not capped and r.sm_clock_mhz is not None and r.sm_clock_mhz < CLOCK_FLOOR * app:
            return f"SM clock below {CLOCK_FLOOR:.0%} of the {app} MHz application clock"
        return None

    def before(self) -> None:
        self._before = self._reader.read()
        self.readings += 1

    def after(self) -> str | None:
        after = self._reader.read()
        self.readings += 1
        first = self._why(self._before) if self._before is not None else None
        return first or self._why(after)


def resolve_cache(mode: str, working_set_bytes: float, cache: int | None, called_once: bool) -> tuple[str, str | None]:
    """The cache state a row is measured in ("hot" or "cold") and, when it differs from what was asked, why."""
    if mode == "hot" or (mode == "auto" and not called_once):  # a loop is hot, whatever the cache holds
        return "hot", None
    if cache is None:
        return "hot", "cold asked for, but the cache size of this device is unknown: measured hot"
    if mode == "cold":
        return "cold", None
    return ("cold", None) if called_once and working_set_bytes <= cache else ("hot", None)


def make_flush(backend: Any, cache: int) -> Callable[[], None]:
    """``flush()`` writes a buffer of 2 × ``cache`` bytes on ``backend``'s device (queued on a GPU: stream order puts
    it before the sample's start event). The buffer is allocated once, here."""
    n = max(1, 2 * cache // 4)
    buf = backend.empty((n,), "float32")
    state = {"v": 0}

    def fill() -> None:
        state["v"] = (state["v"] + 1) % 7  # a new value each time: nothing can skip the write
        backend.fill(buf, float(state["v"]))

    try:
        fill()
        return fill
    except (AttributeError, TypeError):  # device arrays without fill (numba): a device-to-device copy writes it
        src = backend.empty((n,), "float32")
        return lambda: buf.copy_to_device(src)


def cache_state(
    mode: str, backend: Any, gpu_index: int, working_set_bytes: float, called_once: bool
) -> tuple[str, str | None, Callable[[], None] | None]:
    """A row's cache state ("hot" or "cold"), why it differs from ``mode`` (or None), and the flush a cold row runs
    before each sample (the device's last-level cache size read from the hardware, only when it may be needed)."""
    from gpukit.hardware.state import cache_bytes

    needed = mode == "cold" or (mode == "auto" and called_once)  # read the hardware only when cold is possible
    size = cache_bytes(backend.device, gpu_index) if needed else None
    cache, note = resolve_cache(mode, working_set_bytes, size, called_once)
    return cache, note, (make_flush(backend, size) if cache == "cold" and size else None)


def throttle_guard(device: str, enabled: bool, gpu_index: int) -> ThrottleGuard | None:
    """The throttle guard of a GPU row (None on the CPU, with --no-throttle-check, or without NVML)."""
    if device != "cuda" or not enabled:
        return None
    try:
        from gpukit.hardware.state import ClockReader

        reader = ClockReader(gpu_index)
    except Exception:  # no telemetry: samples are kept, and nothing says they were watched
        return None
    return ThrottleGuard(reader) if reader.available else None
