"""One view of the machine: CPU, GPUs, topology and software stack — the `gpukit info --json` document.

``inventory()`` is the full picture (framework probes run in parallel subprocesses); ``machine_fingerprint()`` is the
cheap subset the results history stores with every run.
"""

from __future__ import annotations

import platform
import socket
from dataclasses import dataclass, field
from typing import Any

from gpukit.hardware.cpu import CpuInfo, read_cpu

__all__ = ["SCHEMA_VERSION", "Inventory", "inventory", "machine_fingerprint"]

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Inventory:
    cpu: CpuInfo
    gpus: tuple[Any, ...] = ()
    gpus_reason: str | None = None
    topology: dict[str, object] = field(default_factory=dict)
    stack: dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": SCHEMA_VERSION,
            "cpu": self.cpu.to_dict(),
            "gpus": [g.to_dict() for g in self.gpus],
            "gpus_reason": self.gpus_reason,
            "topology": self.topology,
            "stack": self.stack,
        }


def inventory(probe_frameworks: bool = True) -> Inventory:
    """Everything gpukit can learn about this machine; never raises for missing hardware or packages."""
    return Inventory(cpu=read_cpu(), gpus=(), gpus_reason="not implemented yet")


def machine_fingerprint() -> dict[str, object]:
    """Cheap identity of this machine for the results history (no framework probing, no CUDA init)."""
    cpu = read_cpu()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu.model,
        "cpu_cores": cpu.cores,
        "cpu_threads": cpu.threads,
        "gpu_names": [],
        "gpu_count": 0,
        "driver_version": None,
        "python": platform.python_version(),
        "torch": None,
    }
