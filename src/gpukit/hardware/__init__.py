"""What machine is this: CPU, GPUs, topology, software stack, datasheet specs, live telemetry and doctor checks.

Importing this package is cheap; NVML and framework probes run only when a function is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpukit.hardware.inventory import Inventory

__all__ = ["inventory", "machine_fingerprint"]


def inventory(probe_frameworks: bool | None = True, probe_timeout_s: float = 60.0) -> Inventory:
    """The whole machine (the `gpukit info --json` document is ``inventory().to_dict()``).

    ``probe_frameworks``: True imports each installed framework in a child interpreter (in parallel, with a timeout)
    to ask whether it sees a GPU; False reads versions from package metadata only; None probes only when an NVIDIA
    GPU is present.
    """
    from gpukit.hardware.inventory import inventory as _inventory

    return _inventory(probe_frameworks=probe_frameworks, probe_timeout_s=probe_timeout_s)


def machine_fingerprint() -> dict[str, object]:
    """Cheap identity of this machine stored with every results-history run."""
    from gpukit.hardware.inventory import machine_fingerprint as _fingerprint

    return _fingerprint()
