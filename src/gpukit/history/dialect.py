"""The one place where SQLite and PostgreSQL differ: connecting, SQL placeholders, the id column, listing tables,
transactions and the lock taken for a migration, and what a driver error means.

Every query of :mod:`gpukit.history` is written once, with ``?`` placeholders; :meth:`Db.execute` hands it to the
driver in the driver's style. A driver error leaves here as :class:`DbFailure` with a ``kind`` (``"locked"``,
``"readonly"``, ``"damaged"``, ``"unreachable"``, ``"credentials"``, ``"other"``) that the store turns into an
error and a hint. PostgreSQL goes through psycopg 3 (``pip install 'gpukit[fleet]'``), imported only when used.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:
    import fcntl  # POSIX: gpukit's writers of one SQLite file take turns (SqliteDb._turn)
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["URL_SCHEMES", "Db", "DbFailure", "PostgresDb", "SqliteDb", "is_url", "redact"]

URL_SCHEMES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT_S = 10
_MIGRATION_LOCK = 0x67706B6974  # "gpukit": the advisory lock every PostgreSQL migration takes


class DbFailure(Exception):
    """A driver error, classified. ``kind`` says what the store should tell the user."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def is_url(db: str | Path) -> bool:
    return isinstance(db, str) and db.strip().lower().startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """The URL without its password (in the user part, or a ``password=`` parameter), for messages and listings."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}@{hostport}"
        parts = parts._replace(netloc=netloc)
    query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", parts.query)
    return urlunsplit(parts._replace(query=query))


class Db(ABC):
    """One open connection. Subclasses say how their driver differs."""

    name = "db"
    pk = ""  # the DDL of an auto-numbered id column
    real = ""  # the DDL of a double-precision column

    def __init__(self, con: Any, location: str) -> None:
        self.con = con
        self.location = location

    def sql(self, query: str) -> str:
        return query

    def execute(self, query: str, params: Sequence[Any] = ()) -> Any:
        with self.failures():
            return self.con.execute(self.sql(query), tuple(params))

    def executemany(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self.failures():
                self.con.cursor().executemany(self.sql(query), [tuple(r) for r in rows])

    def insert(self, query: str, params: Sequence[Any]) -> int:
        """Run an ``INSERT`` and return the new row's id (``RETURNING id``: the same on both backends)."""
        rows = self.execute(query + " RETURNING id", params).fetchall()
        return int(rows[0][0])

    @abstractmethod
    def tables(self) -> set[str]:
        """The tables of gpukit's schema (SQLite: the file; PostgreSQL: the current schema)."""

    @abstractmethod
    def failures(self) -> AbstractContextManager[None]:
        """A context in which a driver error becomes a :class:`DbFailure`."""

    @abstractmethod
    def transaction(self, migrating: bool = False, commit: bool = True) -> AbstractContextManager[None]:
        """One transaction holding the write lock (SQLite) or, when ``migrating``, the migration lock (PostgreSQL);
        rolled back on any error, and at its end when not ``commit``."""

    def close(self) -> None:
        self.con.close()


class SqliteDb(Db):
    name = "sqlite"
    pk = "INTEGER PRIMARY KEY AUTOINCREMENT"
    real = "REAL"

    busy_timeout_s = 30.0

    @classmethod
    def connect(cls, path: Path, busy_timeout_s: float) -> SqliteDb:
        try:
            con = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)  # transactions: ours
        except sqlite3.Error as exc:
            raise DbFailure("other", str(exc)) from exc
        db = cls(con, str(path))
        db.busy_timeout_s = busy_timeout_s
        try:
            db.execute("PRAGMA foreign_keys = ON")
        except DbFailure:
            con.close()
            raise
        return db

    def tables(self) -> set[str]:
        rows = self.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(r[0]) for r in rows} - {"sqlite_sequence"}

    @contextmanager
    def failures(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            kind = "locked" if ("locked" in text or "busy" in text) else "other"
            raise DbFailure("readonly" if "readonly" in text or "read-only" in text else kind, text) from exc
        except sqlite3.DatabaseError as exc:  # not a database, malformed page, ...
            raise DbFailure("damaged", str(exc)) from exc
        except sqlite3.Error as exc:
            raise DbFailure("other", str(exc)) from exc

    @contextmanager
    def _turn(self) -> Iterator[float]:
        """gpukit's writers to one file take turns: an flock on ``<file>.lock``, tried every millisecond until the
        busy timeout. SQLite's own busy handler backs off up to 100 ms between tries, so under many writers one of
        them can lose every race for longer than the timeout (16 writers x 100 saves did); a short, even poll
        gives each waiter a fair chance. Yields the seconds left of the timeout. A folder where the lock file
        cannot be made (read-only) leaves SQLite's lock alone to decide."""
        deadline = time.monotonic() + self.busy_timeout_s
        try:
            fd = os.open(f"{self.location}.lock", os.O_RDWR | os.O_CREAT, 0o644) if fcntl is not None else -1
        except OSError:
            fd = -1
        if fd < 0:
            yield self.busy_timeout_s
            return
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise DbFailure("locked", "database is locked") from None
                    time.sleep(0.001)
            yield max(deadline - time.monotonic(), 0.0)
        finally:
            os.close(fd)  # releases the flock

    @contextmanager
    def transaction(self, migrating: bool = False, commit: bool = True) -> Iterator[None]:
        with self._turn() as left_s:
            self.execute(f"PRAGMA busy_timeout = {int(left_s * 1000)}")  # a writer outside gpukit's turns
            self.execute("BEGIN IMMEDIATE")  # the write lock now (waiting up to the busy timeout), not at the commit
            try:
                yield
            except BaseException:
                if self.con.in_transaction:
                    self.con.rollback()
                raise
            self.execute("COMMIT" if commit else "ROLLBACK")


class PostgresDb(Db):
    name = "postgresql"
    pk = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    real = "DOUBLE PRECISION"

    @classmethod
    def connect(cls, url: str) -> PostgresDb:
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
        except ImportError as exc:
            raise DbFailure("driver", f"psycopg is not installed ({exc})") from exc
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise DbFailure("url", str(exc).strip()) from exc
        ports = str(given.get("port") or "0").split(",")
        if not all(p.strip().isdigit() for p in ports):
            raise DbFailure("url", f"the port {given.get('port')!r} is not a number")
        extra: dict[str, Any] = {"application_name": "gpukit"}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = CONNECT_TIMEOUT_S
        try:
            con = psycopg.connect(url, autocommit=True, **extra)  # transactions: ours, one per write
        except psycopg.OperationalError as exc:
            text = str(exc).strip()
            auth = "password authentication failed" in text or "no password supplied" in text
            kind = "credentials" if auth else "nodb" if re.search(r'database "[^"]*" does not exist', text) else None
            raise DbFailure(kind or "unreachable", text.splitlines()[0] if text else "") from exc
        except psycopg.Error as exc:
            raise DbFailure("unreachable", str(exc).strip()) from exc
        return cls(con, redact(url))

    def sql(self, query: str) -> str:
        return query.replace("%", "%%").replace("?", "%s")

    def tables(self) -> set[str]:
        rows = self.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
        return {str(r[0]) for r in rows}

    @contextmanager
    def failures(self) -> Iterator[None]:
        import psycopg
        from psycopg import errors

        try:
            yield
        except (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction) as exc:
            raise DbFailure("readonly", str(exc).strip()) from exc
        except (errors.LockNotAvailable, errors.DeadlockDetected) as exc:
            raise DbFailure("locked", str(exc).strip()) from exc
        except psycopg.OperationalError as exc:  # the server went away mid-way
            raise DbFailure("unreachable", str(exc).strip()) from exc
        except psycopg.Error as exc:
            raise DbFailure("other", str(exc).strip()) from exc

    @contextmanager
    def transaction(self, migrating: bool = False, commit: bool = True) -> Iterator[None]:
        with self.failures(), self.con.transaction(force_rollback=not commit):
            if migrating:  # one migrator at a time; the others wait here, then find the schema current
                self.con.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            yield
