"""The fleet: judging GPUs against their node, their fleet and a shipped reference (`gpukit accept`, `gpukit fleet`).

Above ``bench`` / ``history`` / ``hardware``, below ``cli``. The modules:

- ``stats``: median, MAD and the slow rule, one copy used by ``accept`` and ``fleet`` alike;
- ``record``: the acceptance document (figure names, units, directions);
- ``status`` / ``outliers`` / ``compare`` / ``report`` / ``exporter``: what `gpukit fleet` shows over a store.

Importing the package imports nothing heavy; import the module you need (``from gpukit.fleet import stats``).
"""

from __future__ import annotations

# The package's face is its modules (``from gpukit.fleet import stats``): importing it stays free of NumPy and torch.
__all__ = [
    "accept",
    "accept_figures",
    "accept_judge",
    "accept_node",
    "accept_reference",
    "compare",
    "exporter",
    "k8s",
    "outliers",
    "prom",
    "record",
    "report",
    "soak",
    "stats",
    "status",
    "telemetry",
]
