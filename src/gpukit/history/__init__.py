"""The results history of gpukit: bench runs, `plan --measure` validations, load tests and node acceptances, in
an SQLite file (the embedded default, stdlib only) or a PostgreSQL server the fleet shares (psycopg 3,
``pip install 'gpukit[fleet]'``) — one schema, one set of queries, the difference kept in :mod:`.dialect`.

Below ``bench``, ``plan``, ``serve`` and ``fleet``; imports :mod:`gpukit.errors` (and, to stamp each run with the
node's identity, :mod:`gpukit.hardware.identity`). Public API::

    from gpukit.history import open_history, default_db_path
    with open_history("postgresql://gpukit@db/fleet", node="rack3-n07") as h:   # or a path, or None: the default
        run_id = h.save_run(run.to_dict())   # validated (or created) at open: ConfigError with a hint if unusable
        h.save_acceptance(doc)               # the whole `gpukit accept` document, one transaction
        h.latest_acceptances()               # the newest per node, newest-first lists with "id" and "created_at"
"""

from __future__ import annotations

from gpukit.history.fallback import import_file, save_or_keep, write_fallback
from gpukit.history.paths import default_db_path, resolve_db, resolve_path
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
    "resolve_db",
    "resolve_path",
    "save_or_keep",
    "write_fallback",
]
