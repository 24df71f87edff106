"""The hardware state a measurement depends on, and the few readings the bench takes around every timed sample.

* :func:`gpu_states` — per GPU: model, serial, UUID, application and maximum clocks, enforced power limit,
  persistence, ECC and MIG mode. Two runs whose states differ are not compared (``bench.verdict``).
* :class:`ClockReader` — the SM clock and the clock-event ("throttle") reasons of one GPU, two NVML calls; the
  bench reads it before and after each timed sample, against the GPU's application clock.
* :func:`cache_bytes` — the size of the last-level cache a cold measurement must flush: the GPU's L2 (CUDA driver
  attribute, no framework needed) or the CPU's last cache level (sysfs).

Nothing here raises: what cannot be read is ``None``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpukit.hardware import _nvml

__all__ = ["ClockReader", "ClockSample", "cache_bytes", "gpu_states"]

_CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38  # cuda.h: CUdevice_attribute


def _one_state(nv: Any, index: int) -> dict[str, Any] | None:
    h = _nvml.handle(index)
    if h is None:
        return None

    def read(name: str, *args: Any) -> Any:  # a function this pynvml lacks reads as unknown, like an unsupported one
        return _nvml.call(getattr(nv, name, None), h, *args)

    sm, mem = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
    limit, ecc, mig = (
        read("nvmlDeviceGetEnforcedPowerLimit"),
        read("nvmlDeviceGetEccMode"),
        read("nvmlDeviceGetMigMode"),
    )
    persistence = read("nvmlDeviceGetPersistenceMode")
    return {
        "index": index,
        "name": _nvml.text(read("nvmlDeviceGetName")),
        "serial": _nvml.text(read("nvmlDeviceGetSerial")),
        "uuid": _nvml.text(read("nvmlDeviceGetUUID")),
        "app_sm_clock_mhz": read("nvmlDeviceGetApplicationsClock", sm),
        "app_mem_clock_mhz": read("nvmlDeviceGetApplicationsClock", mem),
        "max_sm_clock_mhz": read("nvmlDeviceGetMaxClockInfo", sm),
        "power_limit_w": limit / 1000.0 if limit else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "ecc_enabled": bool(ecc[0]) if ecc else None,
        "mig_enabled": bool(mig[0]) if mig else None,
    }


def gpu_states() -> list[dict[str, Any]]:
    """Every GPU's state as NVML reports it ([] without NVML). Never raises."""
    try:
        nv = _nvml.module()
        if nv is None:
            return []
        count = _nvml.call(nv.nvmlDeviceGetCount) or 0
        return [s for s in (_one_state(nv, i) for i in range(count)) if s is not None]
    except Exception:  # a state that cannot be read is unknown, never a crash
        return []


@dataclass(frozen=True)
class ClockSample:
    """One reading: SM clock (MHz, None when unknown) and the clock-event reasons set at that moment."""

    sm_clock_mhz: int | None
    reasons: tuple[str, ...]


class ClockReader:
    """Reads GPU ``index``'s SM clock and clock-event reasons (``read()``); ``app_clock_mhz`` is the application
    clock the SM clock is judged against (None when NVML gives none; then the maximum clock)."""

    def __init__(self, index: int) -> None:
        self.index = index
        nv = _nvml.module()
        self._nv = nv
        self._h = _nvml.handle(index) if nv is not None else None
        self.app_clock_mhz: int | None = None
        if nv is not None and self._h is not None:
            self.app_clock_mhz = _nvml.call(nv.nvmlDeviceGetApplicationsClock, self._h, nv.NVML_CLOCK_SM) or (
                _nvml.call(nv.nvmlDeviceGetMaxClockInfo, self._h, nv.NVML_CLOCK_SM)
            )
        self._reasons = None
        if nv is not None:
            self._reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )

    @property
    def available(self) -> bool:
        return self._nv is not None and self._h is not None

    def read(self) -> ClockSample:
        if not self.available:
            return ClockSample(None, ())
        nv, h = self._nv, self._h
        clock = _nvml.call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        return ClockSample(clock, _nvml.decode_throttle(_nvml.call(self._reasons, h)))


def _gpu_l2_bytes(index: int) -> int | None:
    """The L2 size of CUDA device ``index`` from the driver API (libcuda), or None."""
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        lib = ctypes.CDLL(name)
        if lib.cuInit(0) != 0:
            return None
        dev, value = ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return None
        if lib.cuDeviceGetAttribute(ctypes.byref(value), _CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev) != 0:
            return None
        return int(value.value) or None
    except (OSError, AttributeError):
        return None


def _size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def _cpu_llc_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """The largest cache level of CPU 0 (its L3, or L2 where there is none), from sysfs; None elsewhere."""
    best: tuple[int, int] | None = None
    try:
        for entry in root.glob("index*"):
            level = int((entry / "level").read_text())
            size = _size((entry / "size").read_text())
            if size and (best is None or level > best[0]):
                best = (level, size)
    except (OSError, ValueError):
        return None
    return best[1] if best else None


def cache_bytes(device: str, index: int = 0) -> int | None:
    """Bytes of the last-level cache of ``device`` ("cuda": GPU ``index``'s L2; "cpu": the host's largest level)."""
    try:
        return _gpu_l2_bytes(index) if device == "cuda" else _cpu_llc_bytes()
    except Exception:  # unknown is None, never a crash
        return None
