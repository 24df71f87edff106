"""What `gpukit doctor` looks at, gathered once into a plain, frozen object.

Every check is a function of a :class:`Facts`; tests build one by hand (a fake hardware layer) and need no NVML.
"""

from __future__ import annotations

import glob
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from gpukit.hardware.gpu import GpuInfo, PciDevice
from gpukit.hardware.inventory import Inventory, inventory
from gpukit.hardware.stack import FrameworkProbe

__all__ = ["Facts", "Finding", "Level", "facts_from_inventory", "gather_facts"]

Level = Literal["PASS", "WARN", "FAIL", "SKIP"]


@dataclass(frozen=True)
class Finding:
    check: str  # registry name, e.g. "driver", "framework:numba"
    level: Level
    message: str  # one line: what was found
    hint: str | None = None  # what to do about it (None when there is nothing to do)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Facts:
    pci_devices: tuple[PciDevice, ...] = ()
    kernel_module_loaded: bool = False
    nvml_ok: bool = False
    nvml_error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # highest CUDA the driver supports, "12.8"
    gpus: tuple[GpuInfo, ...] = ()
    frameworks: tuple[FrameworkProbe, ...] = ()
    cuda_visible_devices: str | None = None
    nvcc_path: str | None = None
    nvcc_version: str | None = None
    cuda_toolkits: tuple[str, ...] = ()
    ld_library_path: str | None = None
    ld_so_conf_paths: tuple[str, ...] = ()  # library directories registered with ldconfig
    own_pids: frozenset[int] = field(default_factory=frozenset)

    @property
    def has_nvidia_gpu(self) -> bool:
        return bool(self.pci_devices or self.gpus)

    def framework(self, name: str) -> FrameworkProbe | None:
        return next((f for f in self.frameworks if f.name == name), None)


def _ld_so_conf_paths() -> tuple[str, ...]:
    paths: list[str] = []
    for conf in sorted(glob.glob("/etc/ld.so.conf.d/*.conf")):
        try:
            lines = Path(conf).read_text().splitlines()
        except OSError:
            continue
        paths.extend(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    return tuple(paths)


def facts_from_inventory(inv: Inventory) -> Facts:
    """The doctor's view of an inventory, plus what only the doctor needs (ldconfig paths, own pid)."""
    s = inv.stack
    return Facts(
        pci_devices=inv.nvidia.pci_devices,
        kernel_module_loaded=inv.nvidia.kernel_module_loaded,
        nvml_ok=inv.nvidia.nvml_ok,
        nvml_error=inv.nvidia.nvml_error,
        driver_version=s.driver_version,
        cuda_driver_version=s.cuda_driver_version,
        gpus=inv.gpus,
        frameworks=s.frameworks,
        cuda_visible_devices=s.cuda_visible_devices,
        nvcc_path=s.nvcc_path,
        nvcc_version=s.nvcc_version,
        cuda_toolkits=s.cuda_toolkits,
        ld_library_path=s.ld_library_path,
        ld_so_conf_paths=_ld_so_conf_paths(),
        own_pids=frozenset({os.getpid()}),
    )


def gather_facts(probe_timeout_s: float = 60.0) -> Facts:
    """Look at this machine (NVML, sysfs, PATH, every installed framework probed in a child)."""
    return facts_from_inventory(inventory(probe_frameworks=True, probe_timeout_s=probe_timeout_s))
