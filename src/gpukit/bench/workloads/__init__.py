"""The workload registry: name → "module:attribute" of a :class:`~gpukit.bench.workloads.base.Workload`.

Adding a workload: write ``workloads/<name>.py`` defining ``WORKLOAD`` and add one line here. Modules are imported
only when asked for, so a broken or heavy workload never slows or breaks the others.
"""

from __future__ import annotations

import importlib

from gpukit.bench.workloads.base import Implementation, Size, Workload
from gpukit.errors import ConfigError

__all__ = ["DEFAULT_WORKLOADS", "WORKLOADS", "Implementation", "Size", "Workload", "get_workload"]

WORKLOADS: dict[str, str] = {
    "vector-add": "gpukit.bench.workloads.vector_add:WORKLOAD",
    "saxpy": "gpukit.bench.workloads.saxpy:WORKLOAD",
    "mandelbrot": "gpukit.bench.workloads.mandelbrot:WORKLOAD",
    "bandwidth": "gpukit.bench.workloads.bandwidth:WORKLOAD",
    "gemm": "gpukit.bench.workloads.gemm:WORKLOAD",
    "cnn-train": "gpukit.bench.workloads.cnn_train:WORKLOAD",
    "mlp-train": "gpukit.bench.workloads.mlp_train:WORKLOAD",
}

# What a plain `gpukit bench` runs (others may be added to WORKLOADS without joining the default set).
DEFAULT_WORKLOADS: list[str] = ["vector-add", "saxpy", "mandelbrot", "bandwidth"]


def get_workload(name: str) -> Workload:
    """The registered workload ``name``; ConfigError naming the known ones otherwise."""
    target = WORKLOADS.get(name)
    if target is None:
        raise ConfigError(f"unknown workload '{name}'", hint=f"known workloads: {', '.join(sorted(WORKLOADS))}")
    module_name, _, attr = target.partition(":")
    workload = getattr(importlib.import_module(module_name), attr)
    assert isinstance(workload, Workload)
    return workload
