"""CPU backends: pure Python, NumPy and Numba (``parallel=True``). Data already lives in host memory, so these
report no transfers (``has_transfers = False``); their clock is the host clock."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpukit.bench.backends.base import Availability, Backend

__all__ = ["NumbaCpuBackend", "NumpyBackend", "PythonBackend"]


class _HostArrays(Backend):
    device = "cpu"
    has_transfers = False

    def to_device(self, host: np.ndarray) -> Any:
        return np.array(host)  # a private copy, so rotated input sets are distinct buffers

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return np.empty(shape, dtype=dtype)


class PythonBackend(_HostArrays):
    """The seed article's plain loops: inputs become Python lists, the output a NumPy array written element-wise."""

    name = "python"

    def availability(self) -> Availability:
        import platform

        return Availability(True, version=platform.python_version())

    def to_device(self, host: np.ndarray) -> Any:
        return host.tolist()


class NumpyBackend(_HostArrays):
    name = "numpy"

    def availability(self) -> Availability:
        return Availability(True, version=np.__version__)


class NumbaCpuBackend(_HostArrays):
    name = "numba-cpu"

    def availability(self) -> Availability:
        try:
            import numba
        except ImportError as exc:
            return Availability(False, f"numba is not installed ({exc})", "pip install numba")
        return Availability(True, version=numba.__version__)
