"""What machine is this: CPU, GPUs, topology, software stack, datasheet specs, live telemetry and doctor checks.

Importing this package is cheap (no NVML, no framework import); NVML initialises on the first call that needs it and
framework probes run only inside :func:`inventory`.

``inventory`` is imported here eagerly on purpose: the submodule ``gpukit.hardware.inventory`` has the same name, and
the import system would otherwise rebind ``gpukit.hardware.inventory`` to the module the first time anything imports
it. Import the module's other names with ``from gpukit.hardware.inventory import Inventory``.
"""

from __future__ import annotations

from gpukit.hardware.inventory import Inventory, inventory, machine_fingerprint

__all__ = ["Inventory", "inventory", "machine_fingerprint"]
