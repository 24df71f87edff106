"""One view of the machine: CPU, GPUs, topology and software stack — the `gpukit info --json` document.

``inventory()`` is the full picture (framework probes run in parallel child interpreters); ``machine_fingerprint()``
is the cheap subset the results history stores with every run. Neither raises for missing hardware or packages.
"""

from __future__ import annotations

import platform
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpukit.hardware import _nvml
from gpukit.hardware.cpu import CpuInfo, read_cpu
from gpukit.hardware.gpu import GpuInfo, PciDevice, gpus_from_torch_probe, nvidia_pci_devices, read_driver, read_gpus
from gpukit.hardware.specs import match_spec
from gpukit.hardware.stack import DEFAULT_PROBE_TIMEOUT_S, Stack, dist_version, read_stack
from gpukit.hardware.topology import Topology, read_topology

__all__ = ["SCHEMA_VERSION", "Inventory", "NvidiaDriver", "inventory", "machine_fingerprint", "read_nvidia_driver"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class NvidiaDriver:
    """Whether the kernel side is there: devices on the bus, the driver module loaded, NVML answering."""

    pci_devices: tuple[PciDevice, ...] = ()
    kernel_module_loaded: bool = False
    nvml_ok: bool = False
    nvml_error: str | None = None

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["pci_devices"] = [asdict(p) for p in self.pci_devices]
        return d


@dataclass(frozen=True)
class Inventory:
    hostname: str
    cpu: CpuInfo
    gpus: tuple[GpuInfo, ...]
    gpus_reason: str | None  # why ``gpus`` is empty (None when it is not)
    topology: Topology
    stack: Stack
    nvidia: NvidiaDriver = field(default_factory=NvidiaDriver)

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "hostname": self.hostname,
            "cpu": self.cpu.to_dict(),
            "gpus": [g.to_dict() for g in self.gpus],
            "gpus_reason": self.gpus_reason,
            "topology": self.topology.to_dict(),
            "stack": self.stack.to_dict(),
            "nvidia": self.nvidia.to_dict(),
        }


def read_nvidia_driver() -> NvidiaDriver:
    loaded = Path("/proc/driver/nvidia/version").exists() or Path("/sys/module/nvidia").exists()
    ok = _nvml.init()
    return NvidiaDriver(
        pci_devices=nvidia_pci_devices(),
        kernel_module_loaded=loaded,
        nvml_ok=ok,
        nvml_error=None if ok else _nvml.init_error(),
    )


def _datasheet(name: str) -> dict[str, object] | None:
    spec = match_spec(name)
    if spec is None:
        return None
    row = asdict(spec)
    row.pop("match", None)
    return row


def inventory(probe_frameworks: bool | None = True, probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> Inventory:
    """Everything gpukit can learn about this machine.

    ``probe_frameworks``: True imports each installed framework in a child to ask whether it sees a GPU; False
    skips that (versions come from package metadata); None probes only when an NVIDIA GPU is present.
    """
    nvidia = read_nvidia_driver()
    gpus, reason = read_gpus()
    if probe_frameworks is None:
        probe_frameworks = bool(gpus or nvidia.pci_devices)
    driver, cuda_driver = read_driver()
    stack = read_stack(driver, cuda_driver, probe=probe_frameworks, timeout_s=probe_timeout_s)
    torch = stack.framework("torch")
    if not gpus and torch is not None and torch.sees_gpu:  # NVML failed; torch's device properties are second best
        gpus = gpus_from_torch_probe(list(torch.details.get("devices", [])))
        reason = None if gpus else reason
    gpus = tuple(g.with_datasheet(_datasheet(g.name)) for g in gpus)
    return Inventory(
        hostname=socket.gethostname(),
        cpu=read_cpu(),
        gpus=gpus,
        gpus_reason=reason,
        topology=read_topology(gpus),
        stack=stack,
        nvidia=nvidia,
    )


def machine_fingerprint() -> dict[str, object]:
    """Cheap identity of this machine for the results history: no framework import, no CUDA initialisation."""
    cpu = read_cpu()
    names: list[str] = []
    nv = _nvml.module()
    if nv is not None:
        for i in range(_nvml.call(nv.nvmlDeviceGetCount) or 0):
            h = _nvml.handle(i)
            name = _nvml.call(nv.nvmlDeviceGetName, h) if h is not None else None
            names.append(name.decode() if isinstance(name, bytes) else str(name or f"GPU {i}"))
    driver, cuda_driver = read_driver()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu.model,
        "cpu_cores": cpu.cores,
        "cpu_threads": cpu.threads,
        "gpu_names": names,
        "gpu_count": len(names),
        "driver_version": driver,
        "cuda_driver_version": cuda_driver,
        "python": platform.python_version(),
        "torch": dist_version("torch")[1],
    }
