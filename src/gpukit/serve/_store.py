"""Load-test results in the results history: the one place `gpukit.serve` touches it.

TEMPORARY FALLBACK. The shared history (``gpukit.history``, with ``open_history(path).save_loadtest(record)`` and
``.loadtests(limit)``) is being built on another branch. Until it lands, ``open_history`` below keeps load-test
records in a JSON-lines file beside the results database (``results.db`` → ``results.loadtests.jsonl``) with the
same two calls and the same return values; switching is replacing this file's body with
``from gpukit.history import open_history``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError

__all__ = ["open_history"]

try:  # the real history, once it has landed
    from gpukit.history import open_history as _real_open_history  # type: ignore[attr-defined,unused-ignore]
except ImportError:
    _real_open_history = None


class _FallbackHistory:
    def __init__(self, db: Path) -> None:
        self.path = db.with_name(db.stem + ".loadtests.jsonl")

    def save_loadtest(self, record: Mapping[str, Any]) -> int:
        if "url" not in record:
            raise ConfigError("a load-test record needs its url")
        rows = self.loadtests()
        new_id = (rows[0]["id"] + 1) if rows else 1
        row = {**record, "id": new_id, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        return new_id

    def loadtests(self, limit: int | None = None) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        rows: list[dict[str, Any]] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from a crash is skipped, not fatal
        rows.reverse()  # newest first
        return rows[:limit] if limit is not None else rows


def _default_path() -> Path:  # the results history's default (serve does not import bench)
    env = os.environ.get("GPUKIT_DB")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "gpukit" / "results.db"


def open_history(path: Path | None) -> Any:
    """The results history at ``path`` (default: $GPUKIT_DB or ~/.local/share/gpukit/results.db)."""
    if _real_open_history is not None:
        return _real_open_history(path)
    db = Path(path) if path is not None else _default_path()
    if db.exists() and db.is_dir():
        raise ConfigError(f"{db} is a folder, not a results file", hint="pass --db PATH to a file")
    return _FallbackHistory(db)
