"""The connection half of the results history: opening and validating a store (an SQLite file or a PostgreSQL
server), its transactions, the errors and hints of a store that cannot be used, and the node identity every run is
stamped with. :class:`gpukit.history.store.History` adds the records on top; the backends differ only in
:mod:`.dialect`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from gpukit.errors import ConfigError, StoreError
from gpukit.history.dialect import Db, DbFailure, PostgresDb, SqliteDb, is_url, redact
from gpukit.history.paths import data_dir
from gpukit.history.schema import SCHEMA_VERSION, migrate, read_version

try:
    import orjson as _orjson
except ImportError:  # the standard library's decoder, 4-5x slower on large documents
    _orjson = None  # type: ignore[assignment]

__all__ = ["BUSY_TIMEOUT_S", "Store", "damaged", "dumps", "json_or", "limit_clause", "loads", "refusal", "utc_now"]

BUSY_TIMEOUT_S = 30.0  # how long a write to an SQLite file waits for its turn (another writer's lock) before failing
_HINT = "pass --db PATH or --db postgresql://… (or set GPUKIT_DB) to use another store"
_HINTS = {
    "unreachable": "is the server running, and are the host and port right? (gpukit waits 10 s; "
    "?connect_timeout=N in the URL changes that)",
    "credentials": "check the user and password in the URL (or PGPASSWORD, ~/.pgpass)",
    "driver": "pip install 'gpukit[fleet]'",
    "url": "write it as postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
    "readonly": "grant this user INSERT and UPDATE on the gpukit tables, or " + _HINT,
    "nodb": "create it first (createdb NAME, or CREATE DATABASE NAME), or give one that exists",
}
_WHAT = {
    "unreachable": "cannot reach the results store {where}: {failure}",
    "credentials": "the results store {where} refused the credentials: {failure}",
    "driver": "cannot open the results store {where}: {failure}",
    "url": "bad results store URL {where}: {failure}",
    "readonly": "the results store {where} refuses writes: {failure}",
    "nodb": "the results store {where} does not exist on that server: {failure}",
}


def damaged(where: str, what: str) -> ConfigError:
    """A history that cannot be read as one: bad input (exit 2), never a traceback."""
    return ConfigError(f"the results history {where} is damaged: {what}", hint=_HINT + " (this one is damaged)")


def refusal(where: str, failure: DbFailure, doing: str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> ConfigError:
    """A driver failure as bad input: what happened to which store, and what to do about it."""
    kind = failure.kind
    if kind == "locked":
        return ConfigError(
            f"the results history {where} stayed locked for {busy_timeout_s:g} s (another gpukit?)",
            hint="wait for the other run to finish, or " + _HINT,
        )
    if kind == "readonly" and not is_url(where):
        return ConfigError(f"the results history {where} is read-only", hint=_HINT)
    if kind == "damaged":
        return damaged(where, str(failure))
    if kind in _WHAT:
        return ConfigError(_WHAT[kind].format(where=where, failure=failure), hint=_HINTS[kind])
    return ConfigError(f"cannot {doing} the results history {where}: {failure}", hint=_HINT)


def dumps(obj: Any) -> str:
    """JSON with non-finite floats as null (SQLite, PostgreSQL and other readers choke on NaN)."""
    from math import isfinite

    def clean(o: Any) -> Any:
        if isinstance(o, float) and not isfinite(o):
            return None
        if isinstance(o, Mapping):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(obj), default=str)


def _parse(text: Any) -> Any:
    """JSON → Python: orjson when installed (the serve extra; a fleet's 12 MB of acceptance documents decode in a
    fifth of the standard library's time, which `fleet status` is mostly made of), falling back to ``json.loads``
    for what orjson refuses and the standard library reads (NaN written before the store cleaned floats, integers
    past 64 bits)."""
    if _orjson is not None:
        try:
            return _orjson.loads(text)
        except (TypeError, ValueError):
            pass
    return json.loads(text)


def loads(text: Any, what: str, where: str) -> Any:
    try:
        return _parse(text)
    except (TypeError, ValueError) as exc:
        raise damaged(where, f"{what} is not valid JSON") from exc


def json_or(text: Any, default: Any) -> Any:
    """``text`` parsed, or ``default`` for a damaged value (latest_ceilings skips what it cannot read)."""
    try:
        return _parse(text)
    except (TypeError, ValueError):
        return default


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def limit_clause(limit: int | None) -> tuple[str, tuple[int, ...]]:
    return ("", ()) if limit is None else (" LIMIT ?", (int(limit),))


class Store:
    """An open store: its connection, checked. :class:`~gpukit.history.store.History` is the one to use."""

    def __init__(self, db: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S, node: str | None = None) -> None:
        self.backend = "postgresql" if isinstance(db, str) else "sqlite"
        self.url = db if isinstance(db, str) else None
        self.location = redact(db) if isinstance(db, str) else str(db)  # what messages name (no password)
        # the file (SQLite); for a server, the name its fallback files take in gpukit's data folder
        self.path = Path(db) if isinstance(db, Path) else data_dir() / _server_file_name(db)
        self.busy_timeout_s = busy_timeout_s
        self.node_name = node
        self._identity: dict[str, Any] | None = None
        self.version = 0  # the store's schema version once open (0: no store yet); a reader may see an older one
        self._db: Db | None = None
        self._in_write = False

    # --- opening and validation ---

    def _open(self, create: bool) -> None:
        db = self._connect_server() if self.url is not None else self._connect_file(create)
        if db is None:
            return
        try:
            self._validate(db, create)
        except BaseException:
            db.close()
            raise
        self._db = db

    def _connect_server(self) -> Db:
        assert self.url is not None
        try:
            return PostgresDb.connect(self.url)
        except DbFailure as f:
            raise refusal(self.location, f, "open") from f

    def _connect_file(self, create: bool) -> Db | None:
        p = self.path
        if p.is_dir():
            raise ConfigError(f"the results history {p} is a directory", hint=f"pass --db {p / 'results.db'}")
        if not p.exists():
            if not create:
                return None
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the folder of the results history {p}: {exc}", hint=_HINT) from exc
        try:
            return SqliteDb.connect(p, self.busy_timeout_s)
        except DbFailure as f:
            raise refusal(self.location, f, "open", self.busy_timeout_s) from f

    def _check(self, version: str | None, names: set[str]) -> int:
        """The store's version as a number; ConfigError for a foreign, newer or damaged one."""
        where = self.location
        if version is None:
            # a new store, or one `plan --measure` of an earlier gpukit wrote (its one table): ours to stamp
            if names - {"plan_validations"}:
                raise ConfigError(
                    f"{where} is not a gpukit results history (it holds other tables)",
                    hint=_HINT + (" (a database of its own, or ?options=-csearch_path%3Dgpukit)" if self.url else ""),
                )
            return 0
        if not version.isdigit() or int(version) > SCHEMA_VERSION:
            raise ConfigError(
                f"{where} has results schema {version}; this gpukit reads up to {SCHEMA_VERSION}",
                hint="upgrade gpukit (every node writing to one store needs the same one), or " + _HINT,
            )
        if missing := {"runs", "results"} - names:
            raise damaged(where, f"no table {', '.join(sorted(missing))}")
        return int(version)

    def _validate(self, db: Db, write: bool) -> None:
        try:
            names = db.tables()  # the first real read: a file that is not SQLite fails here
            current = self._check(read_version(db, names), names)
        except DbFailure as f:
            if f.kind == "damaged":
                raise ConfigError(
                    f"{self.location} is not a gpukit results history (not an SQLite file: {f})", hint=_HINT
                ) from f
            raise refusal(self.location, f, "read", self.busy_timeout_s) from f
        self.version = current
        if not write:
            return  # a reader sees the tables and columns there are (missing: empty); the first writer migrates
        try:
            if current < SCHEMA_VERSION:
                with db.transaction(migrating=True):  # under the lock: another node may have migrated meanwhile
                    names = db.tables()
                    current = self._check(read_version(db, names), names)
                    if current < SCHEMA_VERSION:
                        migrate(db, current)
                self.version = SCHEMA_VERSION
            else:  # a write that changes nothing, rolled back: takes the write lock (waiting for another gpukit)
                with db.transaction(commit=False):  # and fails now, not after the run, on a read-only store
                    db.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
        except DbFailure as f:
            raise refusal(self.location, f, "write", self.busy_timeout_s) from f

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[Db | None]:
        """The connection (None for a history that does not exist yet); damage found while reading → ConfigError."""
        try:
            yield self._db
        except DbFailure as f:
            raise (damaged(self.location, str(f)) if f.kind in ("damaged", "other") else refusal(
                self.location, f, "read", self.busy_timeout_s)) from f  # fmt: skip

    @contextmanager
    def _writing(self) -> Iterator[Db]:
        """One transaction; any failure → StoreError, nothing of it kept (the caller keeps the record, see
        write_fallback). Inside another ``_writing`` it joins that one (an import is all or nothing)."""
        if self._db is None:
            raise StoreError(
                f"the results history {self.location} was opened read-only", hint="open it with create=True"
            )
        if self._in_write:
            yield self._db
            return
        self._in_write = True
        try:
            with self._db.transaction():
                yield self._db
        except DbFailure as f:
            hint = _HINTS.get(f.kind, _HINT)
            raise StoreError(f"cannot write the results history {self.location}: {f}", hint=hint) from f
        finally:
            self._in_write = False

    def _has(self, db: Db | None, *names: str) -> bool:
        return db is not None and set(names) <= db.tables()

    def _v3(self, column: str) -> str:
        """``column`` (added by schema 3), or NULL when reading an older store that a reader does not migrate."""
        return column if self.version >= 3 else "NULL"

    # --- the node ---

    def identity(self) -> dict[str, Any]:
        """This node's identity (:func:`gpukit.hardware.identity.node_identity`, with ``--node``), read once."""
        if self._identity is None:
            from gpukit.hardware.identity import node_identity

            self._identity = node_identity(self.node_name)
        return self._identity

    def stamped(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """``record`` with this node's identity under ``"node"`` unless it carries one already."""
        out = dict(record)
        if not isinstance(out.get("node"), Mapping):
            out["node"] = self.identity()
        return out

    def _records(
        self, table: str, limit: int | None, where: str = "", params: tuple[Any, ...] = ()
    ) -> list[dict[str, Any]]:
        tail, lim = limit_clause(limit)
        query = f"SELECT id, created_at, record_json FROM {table}{where} ORDER BY id DESC{tail}"
        return self._select(table, query, params + lim)

    def _select(self, table: str, query: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        with self._reading() as db:
            if not self._has(db, table):
                return []
            assert db is not None
            rows = db.execute(query, params).fetchall()
        out = []
        for rid, created, text in rows:
            value = loads(text, f"{table} row {rid}", self.location)
            value = value if isinstance(value, dict) else {"value": value}
            out.append({**value, "id": int(rid), "created_at": created})
        return out


def _server_file_name(url: str) -> str:
    """``postgresql://u:p@db.example:5432/fleet`` → ``postgresql-db.example-5432-fleet.db``: the stem of the fallback
    files written when that server refuses a record."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host, _, port = parts.netloc.rpartition("@")[2].partition(":")
    bits = [host or "local", port or "5432", parts.path.strip("/") or "postgres"]
    safe = "-".join("".join(c if c.isalnum() or c in "._" else "_" for c in b) for b in bits)
    return f"postgresql-{safe}.db"
