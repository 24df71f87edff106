"""The history's schema (one text for SQLite and PostgreSQL), its migrations, and the version stamp.

Version 1 (gpukit ≤ the first engine pass): ``meta``, ``runs``, ``results``. Version 2 adds ``plan_validations``
(written until then by `plan --measure` with its own SQL, without a ``meta`` stamp — such a file is adopted) and
``loadtests``. Version 3 (the fleet) adds ``acceptances`` (`gpukit accept`, one row per node run, indexed by node)
and the node's identity on ``runs``. Migrations only add, so an older gpukit refuses a newer store before writing
anything. ``{pk}`` and ``{real}`` are the only words the backends spell differently (:mod:`.dialect`).
"""

from __future__ import annotations

import uuid

from gpukit.history.dialect import Db

__all__ = ["SCHEMA_VERSION", "migrate", "read_version"]

SCHEMA_VERSION = 3

_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id {pk},
    started_at TEXT NOT NULL,
    duration_s {real},
    interrupted INTEGER NOT NULL DEFAULT 0,
    hostname TEXT,
    gpu TEXT,
    machine_json TEXT NOT NULL,
    versions_json TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    ceilings_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    id {pk},
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    workload TEXT NOT NULL,
    backend TEXT NOT NULL,
    device TEXT NOT NULL,
    size TEXT NOT NULL,
    status TEXT NOT NULL,
    kernel_median_s {real},
    row_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
"""

# The plan_validations columns are the ones `plan --measure` has always written, so old files keep working (its id
# was a plain INTEGER PRIMARY KEY there: a new SQLite file gets the same auto-numbered id as every other table).
_V2 = """
CREATE TABLE IF NOT EXISTS plan_validations (
    id {pk},
    created_at {real},
    host TEXT,
    device TEXT,
    model TEXT,
    task TEXT,
    predicted_allocated_bytes BIGINT,
    measured_allocated_bytes BIGINT,
    predicted_time_s {real},
    measured_time_s {real},
    record_json TEXT
);
CREATE TABLE IF NOT EXISTS loadtests (
    id {pk},
    created_at TEXT NOT NULL,
    url TEXT,
    record_json TEXT NOT NULL
);
"""

_V3 = """
CREATE TABLE IF NOT EXISTS acceptances (
    id {pk},
    created_at TEXT NOT NULL,
    node TEXT NOT NULL,
    started_at TEXT,
    verdict TEXT,
    stack_key TEXT,
    record_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS acceptances_node ON acceptances(node, id);
ALTER TABLE runs ADD COLUMN node TEXT;
ALTER TABLE runs ADD COLUMN node_json TEXT;
CREATE INDEX IF NOT EXISTS runs_node ON runs(node, id);
"""

_STEPS = (_V1, _V2, _V3)  # _STEPS[v] brings version v to v + 1


def read_version(db: Db, names: set[str] | None = None) -> str | None:
    """The stamped version, or None when the store has no gpukit ``meta`` row."""
    if "meta" not in (db.tables() if names is None else names):
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return str(row[0]) if row else None


def migrate(db: Db, version: int) -> None:
    """Bring a store at ``version`` (0: new, or a `plan --measure`-only file) to :data:`SCHEMA_VERSION`; call it
    inside ``db.transaction(migrating=True)`` so that it is all or nothing and one process at a time."""
    for step in _STEPS[version:]:
        for statement in step.format(pk=db.pk, real=db.real).split(";"):
            if statement.strip():
                db.execute(statement)
    db.execute(
        "INSERT INTO meta(key, value) VALUES ('schema_version', ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (str(SCHEMA_VERSION),),
    )
    # who this store is, for `history import` from it into another store (what was copied is kept there by this id)
    db.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?) ON CONFLICT(key) DO NOTHING", (uuid.uuid4().hex,))
