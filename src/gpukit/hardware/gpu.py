"""Each NVIDIA GPU as NVML sees it: identity, memory, clocks, power, PCIe, NVLink, ECC, throttling, MIG, processes.

NVML first; when NVML is unavailable the inventory falls back to the device properties a framework probe reported
(see :func:`gpus_from_torch_probe`). Every field NVML does not support is ``None`` — never a crash.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from gpukit.hardware import _nvml

__all__ = [
    "GpuInfo",
    "GpuProcess",
    "NvLink",
    "PciDevice",
    "cuda_version_string",
    "gpus_from_torch_probe",
    "nvidia_pci_devices",
    "read_driver",
    "read_gpus",
]

_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}

# CUDA cores per SM by compute-capability major (minor where it differs): NVML reports cores, not SMs.
_CORES_PER_SM = {"7": 64, "8.0": 64, "8": 128, "9": 128, "10": 128, "12": 128}


@dataclass(frozen=True)
class PciDevice:
    address: str  # sysfs form, "0000:19:00.0"
    device_id: str  # "0x2335"
    class_code: str  # "0x030200" (3D controller) / "0x030000" (VGA)
    driver: str | None  # bound kernel driver ("nvidia", "nouveau", "vfio-pci") or None
    numa_node: int | None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str | None
    used_memory_bytes: int | None
    kind: str  # "compute" or "graphics"


@dataclass(frozen=True)
class NvLink:
    link: int
    active: bool
    remote_pci_bus_id: str | None
    version: int | None
    remote_type: str | None = None  # "gpu", "switch" (NVSwitch: HGX boards), "ibmnpu" or None when unknown


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    source: str = "nvml"  # "nvml" or the framework whose device properties filled this in ("torch")
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: int | None = None
    utilization_pct: int | None = None
    mem_utilization_pct: int | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    nvlinks: tuple[NvLink, ...] = ()
    ecc_enabled: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    mig_enabled: bool | None = None
    processes: tuple[GpuProcess, ...] = ()
    numa_node: int | None = None
    datasheet: dict[str, object] | None = None  # specs.match_spec(name) row; filled in by the inventory

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["nvlinks"] = [asdict(n) for n in self.nvlinks]
        d["processes"] = [asdict(p) for p in self.processes]
        d["throttle_reasons"] = list(self.throttle_reasons)
        return d

    def with_datasheet(self, row: dict[str, object] | None) -> GpuInfo:
        return replace(self, datasheet=row)


def cuda_version_string(raw: int | None) -> str | None:
    """NVML/CUDA integer version (12080) → "12.8"."""
    if not raw:
        return None
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def read_driver() -> tuple[str | None, str | None]:
    """(driver version, highest CUDA version the driver supports) from NVML, or (None, None)."""
    nv = _nvml.module()
    if nv is None:
        return None, None
    driver = _nvml.call(nv.nvmlSystemGetDriverVersion)
    cuda = _nvml.call(nv.nvmlSystemGetCudaDriverVersion_v2) or _nvml.call(nv.nvmlSystemGetCudaDriverVersion)
    return (_nvml.text(driver), cuda_version_string(cuda))


def sysfs_bus_id(nvml_bus_id: str | None) -> str | None:
    """NVML's "00000000:19:00.0" → sysfs "0000:19:00.0"."""
    if not nvml_bus_id:
        return None
    domain, _, rest = nvml_bus_id.lower().partition(":")
    return f"{domain[-4:]}:{rest}" if rest else nvml_bus_id.lower()


def _sysfs_int(path: Path) -> int | None:
    try:
        value = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def nvidia_pci_devices(root: Path = Path("/sys/bus/pci/devices")) -> tuple[PciDevice, ...]:
    """NVIDIA display / 3D controllers on the PCI bus (vendor 0x10de, class 0x03xxxx); lspci not needed."""
    found = []
    for dev in sorted(root.glob("*")):
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
            klass = (dev / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor != "0x10de" or not klass.startswith("0x03"):
            continue
        driver_link = dev / "driver"
        driver = driver_link.resolve().name if driver_link.exists() else None
        try:
            device_id = (dev / "device").read_text().strip()
        except OSError:
            device_id = "?"
        found.append(PciDevice(dev.name, device_id, klass, driver, _sysfs_int(dev / "numa_node")))
    return tuple(found)


def _cc(nv: Any, h: Any) -> str | None:
    cc = _nvml.call(nv.nvmlDeviceGetCudaComputeCapability, h)
    return f"{cc[0]}.{cc[1]}" if cc else None


def _sm_count(nv: Any, h: Any, cc: str | None) -> int | None:
    attrs: Any = _nvml.call(getattr(nv, "nvmlDeviceGetAttributes_v2", None) or nv.nvmlDeviceGetAttributes, h)
    if attrs is not None and getattr(attrs, "multiprocessorCount", None):
        return int(attrs.multiprocessorCount)
    cores = _nvml.call(getattr(nv, "nvmlDeviceGetNumGpuCores", None), h)
    if cores and cc:
        per_sm = _CORES_PER_SM.get(cc) or _CORES_PER_SM.get(cc.split(".")[0])
        if per_sm:
            return int(cores) // per_sm
    return None


def _nvlinks(nv: Any, h: Any) -> tuple[NvLink, ...]:
    links = []
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _nvml.call(nv.nvmlDeviceGetNvLinkState, h, link)
        if state is None:
            continue  # link not present on this part
        remote = _nvml.call(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
        kind = _nvml.call(getattr(nv, "nvmlDeviceGetNvLinkRemoteDeviceType", None), h, link)
        links.append(
            NvLink(
                link=link,
                active=bool(state),
                remote_pci_bus_id=_nvml.text(remote.busId) if remote is not None else None,
                version=_nvml.call(nv.nvmlDeviceGetNvLinkVersion, h, link),
                remote_type=_REMOTE_TYPES.get(kind) if kind is not None else None,
            )
        )
    return tuple(links)


def _ecc(nv: Any, h: Any) -> dict[str, Any]:
    mode = _nvml.call(nv.nvmlDeviceGetEccMode, h)
    enabled = bool(mode[0]) if mode else None
    out: dict[str, Any] = {"ecc_enabled": enabled}
    if not enabled:
        return out
    unc, cor = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
    vol, agg = nv.NVML_VOLATILE_ECC, nv.NVML_AGGREGATE_ECC
    out["ecc_uncorrected_volatile"] = _nvml.call(nv.nvmlDeviceGetTotalEccErrors, h, unc, vol)
    out["ecc_corrected_volatile"] = _nvml.call(nv.nvmlDeviceGetTotalEccErrors, h, cor, vol)
    out["ecc_uncorrected_aggregate"] = _nvml.call(nv.nvmlDeviceGetTotalEccErrors, h, unc, agg)
    return out


def _processes(nv: Any, h: Any) -> tuple[GpuProcess, ...]:
    procs: dict[int, GpuProcess] = {}
    for kind, fn_name in (
        ("compute", "nvmlDeviceGetComputeRunningProcesses"),
        ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
    ):
        for p in _nvml.call(getattr(nv, fn_name, None), h) or []:
            used = getattr(p, "usedGpuMemory", None)
            name = _nvml.text(_nvml.call(nv.nvmlSystemGetProcessName, p.pid))
            procs.setdefault(p.pid, GpuProcess(int(p.pid), name, int(used) if used else None, kind))
    return tuple(procs.values())


def _read_one(nv: Any, index: int) -> GpuInfo | None:
    h = _nvml.handle(index)
    if h is None:
        return None
    call = _nvml.call
    mem = call(nv.nvmlDeviceGetMemoryInfo, h)
    util = call(nv.nvmlDeviceGetUtilizationRates, h)
    power = call(nv.nvmlDeviceGetPowerUsage, h)
    limit = call(nv.nvmlDeviceGetEnforcedPowerLimit, h) or call(nv.nvmlDeviceGetPowerManagementLimit, h)
    pci = call(nv.nvmlDeviceGetPciInfo, h)
    bus_id = _nvml.text(pci.busId) if pci is not None else None
    mig = call(nv.nvmlDeviceGetMigMode, h)
    reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    cc = _cc(nv, h)
    sys_bus = sysfs_bus_id(bus_id)
    return GpuInfo(
        index=index,
        name=_nvml.text(call(nv.nvmlDeviceGetName, h)) or f"GPU {index}",
        uuid=_nvml.text(call(nv.nvmlDeviceGetUUID, h)),
        pci_bus_id=bus_id,
        compute_capability=cc,
        sm_count=_sm_count(nv, h, cc),
        memory_total_bytes=int(mem.total) if mem is not None else None,
        memory_used_bytes=int(mem.used) if mem is not None else None,
        memory_free_bytes=int(mem.free) if mem is not None else None,
        sm_clock_mhz=call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
        sm_clock_max_mhz=call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
        mem_clock_mhz=call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
        mem_clock_max_mhz=call(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
        power_w=power / 1000.0 if power is not None else None,
        power_limit_w=limit / 1000.0 if limit else None,
        temperature_c=call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
        utilization_pct=int(util.gpu) if util is not None else None,
        mem_utilization_pct=int(util.memory) if util is not None else None,
        pcie_gen_current=call(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
        pcie_gen_max=call(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
        pcie_width_current=call(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
        pcie_width_max=call(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
        nvlinks=_nvlinks(nv, h),
        throttle_reasons=_nvml.decode_throttle(call(reasons_fn, h)),
        mig_enabled=bool(mig[0]) if mig else None,
        processes=_processes(nv, h),
        numa_node=_sysfs_int(Path("/sys/bus/pci/devices") / sys_bus / "numa_node") if sys_bus else None,
        **_ecc(nv, h),
    )


def read_gpus() -> tuple[tuple[GpuInfo, ...], str | None]:
    """(GPUs NVML sees, reason when the list is empty). Never raises."""
    nv = _nvml.module()
    if nv is None:
        return (), _no_nvml_reason()
    count = _nvml.call(nv.nvmlDeviceGetCount)
    if not count:
        return (), "NVML initialised but reports no GPU"
    gpus = tuple(g for g in (_read_one(nv, i) for i in range(count)) if g is not None)
    return gpus, (None if gpus else f"NVML reports {count} GPU(s) but none could be opened")


def _no_nvml_reason() -> str:
    err = _nvml.init_error() or "NVML unavailable"
    pci = nvidia_pci_devices()
    if not pci:
        return f"no NVIDIA GPU on the PCI bus ({err})"
    drivers = sorted({d.driver or "none" for d in pci})
    return f"{len(pci)} NVIDIA device(s) on the PCI bus (kernel driver: {', '.join(drivers)}) but {err}"


def gpus_from_torch_probe(devices: list[dict[str, Any]]) -> tuple[GpuInfo, ...]:
    """GPUs from the torch probe's device properties, when NVML is unavailable (fewer fields, the rest None)."""
    out: list[GpuInfo] = []
    for d in devices:
        out.append(
            GpuInfo(
                index=int(d.get("index", len(out))),
                name=str(d.get("name", "?")),
                source="torch",
                uuid=d.get("uuid"),
                compute_capability=d.get("compute_capability"),
                sm_count=d.get("sm_count"),
                memory_total_bytes=d.get("memory_total_bytes"),
            )
        )
    return tuple(out)
