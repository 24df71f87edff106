"""gpukit: a GPU survival toolkit with honest, checked numbers."""

from __future__ import annotations

from gpukit.errors import GpukitError

__version__ = "0.1.0"

__all__ = ["GpukitError", "__version__"]
