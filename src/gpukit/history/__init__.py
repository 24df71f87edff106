"""The results history of gpukit (SQLite, stdlib only): bench runs, `plan --measure` validations and load tests.

Below ``bench``, ``plan`` and ``serve``; imports only :mod:`gpukit.errors`. Public API::

    from gpukit.history import open_history, default_db_path
    with open_history() as h:            # validated (or created) now: ConfigError with a hint if it cannot be used
        run_id = h.save_run(run.to_dict())
        h.save_loadtest({"url": "http://...", "rps": 812.0})
        h.loadtests(limit=5)             # newest first, each with "id" and "created_at"
"""

from __future__ import annotations

from gpukit.history.fallback import import_file, write_fallback
from gpukit.history.paths import default_db_path, resolve_path
from gpukit.history.schema import SCHEMA_VERSION
from gpukit.history.store import BUSY_TIMEOUT_S, History, RunSummary, open_history

__all__ = [
    "BUSY_TIMEOUT_S",
    "SCHEMA_VERSION",
    "History",
    "RunSummary",
    "default_db_path",
    "import_file",
    "open_history",
    "resolve_path",
    "write_fallback",
]
