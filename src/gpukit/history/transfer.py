"""`gpukit history import STORE --db OTHER`: copy one store into another — a node's SQLite file into the fleet's
PostgreSQL store, or back — in one transaction, each record under the node that measured it.

What was copied is remembered in the target (``meta`` key ``imported:<source store id>``: the last id copied of
each table), so importing the same store again copies only what is new since. A source that has no store id (a
file an older gpukit wrote, opened without migrating it) is known by its location instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.history.dialect import is_url
from gpukit.history.store import History

__all__ = ["TABLES", "import_store", "is_store"]

TABLES = ("runs", "plan_validations", "loadtests", "acceptances")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_store(source: str | Path) -> bool:
    """A ``postgresql://`` URL, or a file that is an SQLite database (anything else is a fallback JSON file)."""
    if is_url(source):
        return True
    try:
        with Path(source).expanduser().open("rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _store_id(h: History) -> str | None:
    with h._reading() as db:
        if db is None or "meta" not in db.tables():
            return None
        row = db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    return str(row[0]) if row else None


def _progress(target: History, key: str) -> dict[str, int]:
    with target._reading() as db:
        assert db is not None
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    try:
        done = json.loads(row[0]) if row else {}
    except ValueError:
        done = {}
    return {t: int(done.get(t, 0)) for t in TABLES} if isinstance(done, dict) else dict.fromkeys(TABLES, 0)


def _bare(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("id", "created_at")}


def _run_node(doc: dict[str, Any]) -> dict[str, Any]:
    """A run an older gpukit saved has no node identity: its hostname is all there is (never the importer's)."""
    host = str((doc.get("machine") or {}).get("hostname") or "unknown")
    return {"name": host, "hostname": host, "driver": None, "cuda": None, "gpus": [], "stack": {}, "stack_key": None}


def _copy(target: History, source: History, done: dict[str, int]) -> dict[str, int]:
    """Copy what is newer than ``done`` (source ids) into ``target`` (inside its transaction); the counts copied."""
    copied = dict.fromkeys(TABLES, 0)
    for summary in reversed(source.list_runs(limit=None)):
        if summary.id > done["runs"]:
            doc = source.load_run(summary.id)
            doc.setdefault("node", _run_node(doc))
            target.save_run(_bare(doc))
            done["runs"], copied["runs"] = summary.id, copied["runs"] + 1
    for table, read, save in (
        ("plan_validations", source.validations, target.save_validation),
        ("loadtests", source.loadtests, target.save_loadtest),
        ("acceptances", source.acceptances, target.save_acceptance),
    ):
        for doc in reversed(read()):
            if doc["id"] > done[table]:
                save(_bare(doc), created_at=doc["created_at"])
                done[table], copied[table] = doc["id"], copied[table] + 1
    return copied


def import_store(target: History, source: History) -> dict[str, int]:
    """Copy every run (with its results), plan validation, load test and acceptance of ``source`` that an earlier
    import did not, into ``target``, all or nothing; returns how many of each were copied. Importing a store into
    itself is bad input (ConfigError)."""
    source_id = _store_id(source)
    if source_id is not None and source_id == _store_id(target):
        raise ConfigError(f"{source.location} is the store being imported into", hint="give --db another store")
    key = f"imported:{source_id or source.location}"
    with target._writing() as db:  # one transaction: a failure half-way leaves the target as it was
        done = _progress(target, key)
        copied = _copy(target, source, done)
        db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(done)),
        )
    return copied
