"""Where the results history lives: one answer for `bench`, `history`, `report`, `plan --measure`, `serve` and
`accept`.

Order: an explicit ``--db`` (a file, or a ``postgresql://`` URL for a store the fleet shares), then ``GPUKIT_DB``,
then ``$XDG_DATA_HOME/gpukit/results.db``, then ``~/.local/share/gpukit/results.db`` (the XDG default when the
variable is unset or empty).
"""

from __future__ import annotations

import os
from pathlib import Path

from gpukit.history.dialect import is_url

__all__ = ["data_dir", "default_db_path", "resolve_db", "resolve_path"]


def data_dir() -> Path:
    """gpukit's data folder: ``$XDG_DATA_HOME/gpukit``, else ``~/.local/share/gpukit``."""
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "gpukit"


def default_db_path() -> Path:
    """The history file used when no ``--db`` is given (``GPUKIT_DB`` when it names a file)."""
    env = os.environ.get("GPUKIT_DB")
    if env and not is_url(env):
        return Path(env).expanduser()
    return data_dir() / "results.db"


def resolve_path(path: str | Path | None) -> Path:
    """``path`` (``~`` expanded) when given, else :func:`default_db_path`."""
    return Path(path).expanduser() if path is not None else default_db_path()


def resolve_db(db: str | Path | None) -> str | Path:
    """What ``--db`` (else ``GPUKIT_DB``, else the default file) names: a PostgreSQL URL (a str) or a file path."""
    if db is None:
        env = os.environ.get("GPUKIT_DB")
        if env and is_url(env):
            return env.strip()
    elif is_url(db):
        return str(db).strip()
    return resolve_path(db)
