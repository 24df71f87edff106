"""The backend registry: name → "module:Class" of a :class:`~gpukit.bench.backends.base.Backend`.

Adding a backend: write ``backends/<name>.py`` and add one line here. Classes are imported lazily and instantiated
once; the heavy framework import happens in ``availability()``.
"""

from __future__ import annotations

import importlib
from functools import cache

from gpukit.bench.backends.base import Availability, Backend
from gpukit.errors import ConfigError

__all__ = ["BACKENDS", "Availability", "Backend", "get_backend"]

BACKENDS: dict[str, str] = {
    "python": "gpukit.bench.backends.cpu:PythonBackend",
    "numpy": "gpukit.bench.backends.cpu:NumpyBackend",
    "numba-cpu": "gpukit.bench.backends.cpu:NumbaCpuBackend",
    "torch-cpu": "gpukit.bench.backends.torch:TorchCpuBackend",
    "torch-cuda": "gpukit.bench.backends.torch:TorchCudaBackend",
    "triton": "gpukit.bench.backends.torch:TritonBackend",
    "cupy": "gpukit.bench.backends.cupy:CupyBackend",
    "numba-cuda": "gpukit.bench.backends.numba_cuda:NumbaCudaBackend",
    # output in host memory: only the bandwidth workload's device→host rows use these
    "torch-d2h-pinned": "gpukit.bench.backends.torch:TorchPinnedOutBackend",
    "torch-d2h-pageable": "gpukit.bench.backends.torch:TorchPageableOutBackend",
}


@cache
def get_backend(name: str) -> Backend:
    """The (single) instance of backend ``name``; ConfigError naming the known ones otherwise."""
    target = BACKENDS.get(name)
    if target is None:
        raise ConfigError(f"unknown backend '{name}'", hint=f"known backends: {', '.join(sorted(BACKENDS))}")
    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    backend = cls()
    assert isinstance(backend, Backend)
    return backend
