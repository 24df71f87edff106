"""Load-test results in the results history: the one place `gpukit.serve` touches it (``gpukit.history``, the store
every command shares: ``--db`` (a file or a ``postgresql://`` URL), ``$GPUKIT_DB``, else the default file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["open_history"]


def open_history(path: str | Path | None, create: bool = True) -> Any:
    """The validated results history (ConfigError with a hint when the file cannot be one); ``create=False`` reads
    a missing file as an empty history without creating it."""
    from gpukit.history import open_history as _open

    return _open(path, create=create)
