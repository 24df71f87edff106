"""Where the results history lives: one answer for `bench`, `history`, `report`, `plan --measure` and `serve`.

Order: an explicit path (``--db``), then ``GPUKIT_DB``, then ``$XDG_DATA_HOME/gpukit/results.db``, then
``~/.local/share/gpukit/results.db`` (the XDG default when the variable is unset or empty).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_db_path", "resolve_path"]


def default_db_path() -> Path:
    """The history file used when no ``--db`` is given."""
    env = os.environ.get("GPUKIT_DB")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "gpukit" / "results.db"


def resolve_path(path: str | Path | None) -> Path:
    """``path`` (``~`` expanded) when given, else :func:`default_db_path`."""
    return Path(path).expanduser() if path is not None else default_db_path()
