"""A fake pynvml: the functions gpukit calls, with realistic return types, for a 2-GPU HGX-like H200 board.

Values are plain attributes so a test can flip one (a hot GPU, an ECC error) and watch the outcome change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-0000"
    bus_id: bytes = b"00000000:19:00.0"
    cc: tuple[int, int] = (9, 0)
    cores: int = 16896  # 132 SMs x 128
    mem_total: int = 150_754_820_096
    mem_used: int = 1_000_000_000
    sm_clock: int = 1980
    sm_clock_max: int = 1980
    mem_clock: int = 3201
    mem_clock_max: int = 3201
    power_mw: int = 120_000
    limit_mw: int = 700_000
    temp: int = 34
    util_gpu: int = 0
    util_mem: int = 0
    pcie_gen: int = 5
    pcie_gen_max: int = 5
    pcie_width: int = 16
    pcie_width_max: int = 16
    throttle_mask: int = 0x1  # gpu_idle
    ecc_mode: int = 1
    ecc_uncorrected_volatile: int = 0
    ecc_corrected_volatile: int = 3
    ecc_uncorrected_aggregate: int = 0
    mig: int = 0
    energy_mj: int | None = 5_000_000
    nvlink_states: list[int] = field(default_factory=lambda: [1] * 18)
    nvlink_remote_type: int = 2  # NVSwitch
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, used bytes)


class FakeNvml:
    NVMLError = NVMLError
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_P2P_CAPS_INDEX_READ = 0
    NVML_P2P_STATUS_OK = 0

    def __init__(self, gpus: list[FakeGpu] | None = None, driver: str = "570.86.15", cuda: int = 12080) -> None:
        self.gpus = gpus if gpus is not None else [FakeGpu(), FakeGpu(uuid="GPU-0001", bus_id=b"00000000:2A:00.0")]
        self.driver = driver
        self.cuda = cuda
        self.process_names: dict[int, str] = {}

    def _g(self, h: Any) -> FakeGpu:
        return self.gpus[h]

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < len(self.gpus):
            raise NVMLError("Invalid Argument")
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._g(h).name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._g(h).uuid

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._g(h).bus_id)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self._g(h).cc

    def nvmlDeviceGetAttributes_v2(self, h: int) -> Any:
        raise NVMLError_NotSupported("Not Supported")  # real NVML: MIG handles only

    def nvmlDeviceGetAttributes(self, h: int) -> Any:
        raise NVMLError_NotSupported("Not Supported")

    def nvmlDeviceGetNumGpuCores(self, h: int) -> int:
        return self._g(h).cores

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        g = self._g(h)
        return SimpleNamespace(total=g.mem_total, used=g.mem_used, free=g.mem_total - g.mem_used)

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        g = self._g(h)
        return g.sm_clock if kind == self.NVML_CLOCK_SM else g.mem_clock

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        g = self._g(h)
        return g.sm_clock_max if kind == self.NVML_CLOCK_SM else g.mem_clock_max

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._g(h).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._g(h).limit_mw

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return self._g(h).limit_mw

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self._g(h).temp

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        g = self._g(h)
        return SimpleNamespace(gpu=g.util_gpu, memory=g.util_mem)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._g(h).pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._g(h).pcie_gen_max

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._g(h).pcie_width

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._g(h).pcie_width_max

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._g(h).throttle_mask

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return [self._g(h).ecc_mode, self._g(h).ecc_mode]

    def nvmlDeviceGetTotalEccErrors(self, h: int, err: int, counter: int) -> int:
        g = self._g(h)
        if err == self.NVML_MEMORY_ERROR_TYPE_CORRECTED:
            return g.ecc_corrected_volatile
        return g.ecc_uncorrected_volatile if counter == self.NVML_VOLATILE_ECC else g.ecc_uncorrected_aggregate

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return [self._g(h).mig, self._g(h).mig]

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        e = self._g(h).energy_mj
        if e is None:
            raise NVMLError_NotSupported("Not Supported")
        return e

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        states = self._g(h).nvlink_states
        if link >= len(states):
            raise NVMLError_NotSupported("Not Supported")
        return states[link]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return SimpleNamespace(busId=b"00000000:00:00.0")

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        return self._g(h).nvlink_remote_type

    def nvmlDeviceGetNvLinkVersion(self, h: int, link: int) -> int:
        return 4

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self._g(h).processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[Any]:
        return []

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        return self.process_names.get(pid, "python")

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return 50  # SYS

    def nvmlDeviceGetP2PStatus(self, a: int, b: int, index: int) -> int:
        return self.NVML_P2P_STATUS_OK
