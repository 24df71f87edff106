"""The one NVML session: initialise once (lazily, cached), read fields with the NA habit.

Every NVML read goes through :func:`call`, which turns "not supported", "no permission" and any other NVML error
into ``None``: an unsupported field is unknown, never a crash. Nothing here raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["THROTTLE_BITS", "call", "decode_throttle", "handle", "init", "init_error", "module", "reset", "text", "use"]

T = TypeVar("T")

# Clock event ("throttle") reason bits, as in nvml.h; hard-coded so decoding works without pynvml and is testable.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x0000000000000001, "gpu_idle"),
    (0x0000000000000002, "applications_clocks_setting"),
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000010, "sync_boost"),
    (0x0000000000000020, "sw_thermal_slowdown"),
    (0x0000000000000040, "hw_thermal_slowdown"),
    (0x0000000000000080, "hw_power_brake_slowdown"),
    (0x0000000000000100, "display_clock_setting"),
)

_lock = threading.Lock()
_state: dict[str, Any] = {}


def decode_throttle(mask: int | None) -> tuple[str, ...]:
    """Names of the reason bits set in ``mask``; () for None or 0."""
    if not mask:
        return ()
    return tuple(name for bit, name in THROTTLE_BITS if mask & bit)


def _init() -> None:
    try:
        import pynvml
    except ImportError as exc:
        _state["error"] = f"nvidia-ml-py is not installed ({exc}): pip install nvidia-ml-py"
        return
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        _state["error"] = f"NVML did not initialise: {_describe(exc)}"
        return
    _state["module"] = pynvml


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def init() -> bool:
    """True when NVML initialised here; runs nvmlInit once per process and caches the outcome."""
    with _lock:
        if "done" not in _state:
            _init()
            _state["done"] = True
    return "module" in _state


def init_error() -> str | None:
    """Why NVML is unavailable (None when it initialised)."""
    init()
    return _state.get("error")


def module() -> Any:
    """The initialised pynvml module, or None."""
    return _state.get("module") if init() else None


def call(fn: Callable[..., T] | None, *args: Any) -> T | None:
    """``fn(*args)``, or None when it raises (unsupported, no permission, GPU lost...) or ``fn`` is None."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:
        return None


def text(value: Any) -> str | None:
    """An NVML string (bytes on older pynvml, str on newer) as str; None stays None."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def handle(index: int) -> Any:
    """The NVML handle of device ``index``, or None."""
    nv = module()
    if nv is None:
        return None
    return call(nv.nvmlDeviceGetHandleByIndex, index)


def use(nvml_module: Any | None, error: str | None = None) -> None:
    """Replace the session: an already-initialised pynvml-like module, or None with the reason NVML is unavailable.

    The seam for tests (a fake NVML) and for callers that manage NVML themselves.
    """
    with _lock:
        _state.clear()
        _state["done"] = True
        if nvml_module is not None:
            _state["module"] = nvml_module
        else:
            _state["error"] = error or "NVML unavailable"


def reset() -> None:
    """Forget the cached outcome; the next call initialises NVML again."""
    with _lock:
        _state.clear()
