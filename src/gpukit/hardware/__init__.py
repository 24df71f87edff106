"""What machine is this: CPU, GPUs, topology, software stack, datasheet specs, live telemetry and doctor checks.

Importing this package is cheap; NVML and framework probes run only when a function is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpukit.hardware.inventory import Inventory

__all__ = ["inventory", "machine_fingerprint"]


def inventory(probe_frameworks: bool = True) -> Inventory:
    """The whole machine (the `gpukit info --json` document is ``inventory().to_dict()``)."""
    from gpukit.hardware.inventory import inventory as _inventory

    return _inventory(probe_frameworks=probe_frameworks)


def machine_fingerprint() -> dict[str, object]:
    """Cheap identity of this machine stored with every results-history run."""
    from gpukit.hardware.inventory import machine_fingerprint as _fingerprint

    return _fingerprint()
