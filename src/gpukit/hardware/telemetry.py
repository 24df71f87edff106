"""Live GPU telemetry, cheap enough to sample around every measurement (a few NVML calls).

``sample(i)`` returns clocks, power, temperature, utilisation, throttle reasons and the energy counter of GPU ``i``;
``None`` when NVML or the device is unavailable. Nothing here raises: a field NVML does not support is ``None``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpukit.hardware import _nvml

__all__ = ["GpuTelemetry", "nvml_available", "sample"]


@dataclass(frozen=True)
class GpuTelemetry:
    index: int
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    utilization_pct: int | None
    throttle_reasons: tuple[str, ...]  # decoded names, e.g. ("sw_power_cap",); () when none
    energy_j: float | None  # total energy since driver load; None if unsupported
    mem_utilization_pct: int | None = None
    memory_used_bytes: int | None = None

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["throttle_reasons"] = list(self.throttle_reasons)
        return d


def nvml_available() -> bool:
    """True when NVML initialises here (cached; never raises)."""
    try:
        return _nvml.init()
    except Exception:  # pragma: no cover - _nvml.init already swallows NVML errors
        return False


def sample(index: int) -> GpuTelemetry | None:
    """One telemetry sample of GPU ``index`` (NVML index); None when NVML or the device is unavailable."""
    try:
        return _sample(index)
    except Exception:  # never raise into a measurement loop
        return None


def _sample(index: int) -> GpuTelemetry | None:
    nv = _nvml.module()
    h = _nvml.handle(index)
    if nv is None or h is None:
        return None
    call = _nvml.call
    power_mw = call(nv.nvmlDeviceGetPowerUsage, h)
    energy_mj = call(nv.nvmlDeviceGetTotalEnergyConsumption, h)
    util = call(nv.nvmlDeviceGetUtilizationRates, h)
    mem = call(nv.nvmlDeviceGetMemoryInfo, h)
    reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mask = call(reasons_fn, h) if reasons_fn is not None else None
    return GpuTelemetry(
        index=index,
        sm_clock_mhz=call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
        mem_clock_mhz=call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        temperature_c=call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        utilization_pct=int(util.gpu) if util is not None else None,
        throttle_reasons=_nvml.decode_throttle(mask),
        energy_j=energy_mj / 1000.0 if energy_mj is not None else None,
        mem_utilization_pct=int(util.memory) if util is not None else None,
        memory_used_bytes=int(mem.used) if mem is not None else None,
    )
