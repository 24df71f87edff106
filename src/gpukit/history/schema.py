"""The history's SQLite schema, its migrations, and the checks that a file really is a gpukit history.

Version 1 (gpukit ≤ the first engine pass): ``meta``, ``runs``, ``results``. Version 2 adds ``plan_validations``
(written until then by `plan --measure` with its own SQL, without a ``meta`` stamp — such a file is adopted) and
``loadtests``. Migrations only add tables, so an older gpukit refuses a newer file before writing anything.
"""

from __future__ import annotations

import sqlite3

__all__ = ["GPUKIT_TABLES", "SCHEMA_VERSION", "migrate", "schema_version", "tables"]

SCHEMA_VERSION = 2

_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    duration_s REAL,
    interrupted INTEGER NOT NULL DEFAULT 0,
    hostname TEXT,
    gpu TEXT,
    machine_json TEXT NOT NULL,
    versions_json TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    ceilings_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    workload TEXT NOT NULL,
    backend TEXT NOT NULL,
    device TEXT NOT NULL,
    size TEXT NOT NULL,
    status TEXT NOT NULL,
    kernel_median_s REAL,
    row_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_run ON results(run_id);
"""

# The plan_validations columns are the ones `plan --measure` has always written, so old files keep working.
_V2 = """
CREATE TABLE IF NOT EXISTS plan_validations (
    id INTEGER PRIMARY KEY,
    created_at REAL,
    host TEXT,
    device TEXT,
    model TEXT,
    task TEXT,
    predicted_allocated_bytes INTEGER,
    measured_allocated_bytes INTEGER,
    predicted_time_s REAL,
    measured_time_s REAL,
    record_json TEXT
);
CREATE TABLE IF NOT EXISTS loadtests (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    url TEXT,
    record_json TEXT NOT NULL
);
"""

GPUKIT_TABLES = frozenset({"meta", "runs", "results", "plan_validations", "loadtests", "sqlite_sequence"})


def tables(con: sqlite3.Connection) -> set[str]:
    return {str(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def schema_version(con: sqlite3.Connection) -> str | None:
    """The stamped version, or None when the file has no gpukit ``meta`` row."""
    if "meta" not in tables(con):
        return None
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return str(row[0]) if row else None


def migrate(con: sqlite3.Connection, version: int) -> None:
    """Bring a file at ``version`` (0: new, or a `plan --measure`-only file) to :data:`SCHEMA_VERSION`; one
    transaction, committed by the caller's ``with con``."""
    if version < 1:
        con.executescript(_V1)
    if version < 2:
        con.executescript(_V2)
    con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
