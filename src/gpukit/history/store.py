"""The results history: one validated SQLite connection, bench runs, plan validations and load tests.

:func:`open_history` checks the file before anything is measured (a directory, a corrupt or foreign file, a file
from a newer gpukit, a read-only file → :class:`~gpukit.errors.ConfigError` with a hint, in milliseconds) and
creates it when missing. Writers wait up to ``busy_timeout_s`` for a lock held by another gpukit. What a caller
could not save it writes with :func:`gpukit.history.fallback.write_fallback` and imports later.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from gpukit.errors import ConfigError, StoreError
from gpukit.history.paths import resolve_path
from gpukit.history.schema import SCHEMA_VERSION, migrate, schema_version, tables

__all__ = ["BUSY_TIMEOUT_S", "History", "RunSummary", "dumps", "open_history"]

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another gpukit's lock (sqlite's busy handler) before failing
_HINT = "pass --db PATH (or set GPUKIT_DB) to use another file"


def _damaged(path: Path, what: str) -> ConfigError:
    """A history that cannot be read as one: bad input (exit 2), never a traceback."""
    return ConfigError(f"the results history {path} is damaged: {what}", hint=_HINT + " (this one is damaged)")


@dataclass(frozen=True)
class RunSummary:
    id: int
    started_at: str
    duration_s: float | None
    hostname: str | None
    gpu: str | None
    workloads: list[str]
    n_ok: int
    n_total: int
    quick: bool

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def dumps(obj: Any) -> str:
    """JSON with non-finite floats as null (SQLite and other readers choke on NaN)."""
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


def _loads(text: Any, what: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise _damaged(path, f"{what} is not valid JSON") from exc


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_history(
    path: str | Path | None = None, *, create: bool = True, busy_timeout_s: float = BUSY_TIMEOUT_S
) -> History:
    """The history at ``path`` (default :func:`~gpukit.history.default_db_path`), validated; created (with its
    folder) when missing and ``create``. With ``create=False`` a missing file is an empty history and nothing is
    created. Raises ConfigError (error + hint) for a file that cannot be a writable gpukit history."""
    h = History(resolve_path(path), busy_timeout_s)
    h._open(create)
    return h


class History:
    """An open results history. Use :func:`open_history`; close it, or use it as a context manager."""

    def __init__(self, path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._con: sqlite3.Connection | None = None

    # --- opening and validation ---

    def _open(self, create: bool) -> None:
        p = self.path
        if p.is_dir():
            raise ConfigError(f"the results history {p} is a directory", hint=f"pass --db {p / 'results.db'}")
        if not p.exists():
            if not create:
                return
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the folder of the results history {p}: {exc}", hint=_HINT) from exc
        try:
            con = sqlite3.connect(p, timeout=self.busy_timeout_s)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the results history {p}: {exc}", hint=_HINT) from exc
        try:
            self._validate(con, create)
        except BaseException:
            con.close()
            raise
        self._con = con

    def _validate(self, con: sqlite3.Connection, write: bool) -> None:
        p = self.path
        try:
            con.execute("PRAGMA foreign_keys = ON")
            names = tables(con)  # reading the schema is the first real read: a non-SQLite file fails here
            version = schema_version(con)
        except sqlite3.OperationalError as exc:
            raise self._locked_or(exc, f"cannot read the results history {p}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"{p} is not a gpukit results history (not an SQLite file: {exc})", hint=_HINT) from exc
        if version is None:
            # a new file, or one `plan --measure` of an earlier gpukit wrote (its one table): ours to stamp
            if names - {"plan_validations"}:
                raise ConfigError(f"{p} is not a gpukit results history (it holds other tables)", hint=_HINT)
            current = 0
        elif not version.isdigit() or int(version) > SCHEMA_VERSION:
            raise ConfigError(
                f"{p} has results schema {version}; this gpukit reads up to {SCHEMA_VERSION}",
                hint="upgrade gpukit, or " + _HINT,
            )
        else:
            current = int(version)
            if missing := {"runs", "results"} - names:
                raise _damaged(p, f"no table {', '.join(sorted(missing))}")
        if not write:
            return  # a reader sees the tables there are (a missing one reads as empty); the first writer migrates
        try:
            if current < SCHEMA_VERSION:
                with con:
                    migrate(con, current)
            else:  # a write that changes nothing, rolled back: takes the write lock (waiting for another gpukit)
                con.execute("BEGIN IMMEDIATE")  # and fails now, not after the run, on a read-only file or mount
                con.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
                con.rollback()
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "read-only" in str(exc):
                raise ConfigError(f"the results history {p} is read-only", hint=_HINT) from exc
            raise self._locked_or(exc, f"cannot write the results history {p}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise ConfigError(
                f"the results history {p} is damaged: {exc}", hint=_HINT + " (this one is damaged)"
            ) from exc

    def _locked_or(self, exc: sqlite3.OperationalError, message: str) -> ConfigError:
        if "locked" in str(exc) or "busy" in str(exc):
            return ConfigError(
                f"the results history {self.path} stayed locked for {self.busy_timeout_s:g} s (another gpukit?)",
                hint="wait for the other run to finish, or " + _HINT,
            )
        return ConfigError(message, hint=_HINT)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection | None]:
        """The connection (None for a history that does not exist yet); damage found while reading → ConfigError."""
        try:
            yield self._con
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, str(exc)) from exc

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One transaction; any failure → StoreError (the caller keeps the record, see write_fallback)."""
        if self._con is None:
            raise StoreError(f"the results history {self.path} was opened read-only", hint="open it with create=True")
        try:
            with self._con:
                yield self._con
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the results history {self.path}: {exc}", hint=_HINT) from exc

    # --- bench runs ---

    def save_run(self, run: Mapping[str, Any]) -> int:
        """Store one bench run (``Run.to_dict()``) with all its rows; returns its id."""
        machine = run.get("machine") or {}
        ceilings = run.get("ceilings") or {}
        with self._writing() as con:
            cur = con.execute(
                "INSERT INTO runs(started_at, duration_s, interrupted, hostname, gpu, machine_json, versions_json,"
                " settings_json, ceilings_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.get("started_at") or _now(),
                    run.get("duration_s"),
                    int(bool(run.get("interrupted"))),
                    str(machine.get("hostname", "")) or None,
                    _gpu_of(ceilings, machine),
                    dumps(machine),
                    dumps(run.get("versions") or {}),
                    dumps(run.get("settings") or {}),
                    dumps(ceilings),
                ),
            )
            run_id = int(cur.lastrowid or 0)
            con.executemany(
                "INSERT INTO results(run_id, workload, backend, device, size, status, kernel_median_s, row_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        run_id,
                        r.get("workload", ""),
                        r.get("backend", ""),
                        r.get("device", ""),
                        r.get("size", ""),
                        r.get("status", ""),
                        r.get("kernel_median_s"),
                        dumps(r),
                    )
                    for r in run.get("results") or []
                ],
            )
        return run_id

    def list_runs(self, limit: int | None = 50) -> list[RunSummary]:
        """The latest ``limit`` runs, newest first."""
        with self._reading() as con:
            if con is None or "runs" not in tables(con):
                return []
            rows = con.execute(
                "SELECT r.id, r.started_at, r.duration_s, r.hostname, r.gpu, r.settings_json,"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id AND x.status = 'ok'),"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id)"
                " FROM runs r ORDER BY r.id DESC LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
        out = []
        for rid, started, dur, host, gpu, settings_json, n_ok, n_total in rows:
            settings = _loads(settings_json, f"run {rid}'s settings", self.path)
            settings = settings if isinstance(settings, dict) else {}
            workloads = [str(w) for w in settings.get("workloads") or []]
            out.append(RunSummary(rid, started, dur, host, gpu, workloads, n_ok, n_total, bool(settings.get("quick"))))
        return out

    def load_run(self, run_id: int) -> dict[str, Any]:
        """Run ``run_id`` as the dict ``Run.to_dict()`` made. A missing history or run is bad input (ConfigError)."""
        with self._reading() as con:
            if con is None or "runs" not in tables(con):
                raise ConfigError(f"no results history at {self.path}", hint="run gpukit bench first, or pass --db")
            row = con.execute(
                "SELECT id, started_at, duration_s, interrupted, machine_json, versions_json, settings_json,"
                " ceilings_json FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise ConfigError(f"no run {run_id} in {self.path}", hint="list runs with: gpukit history list")
            results = con.execute("SELECT id, row_json FROM results WHERE run_id = ? ORDER BY id", (run_id,))
            result_rows = results.fetchall()
        doc = {"id": row[0], "started_at": row[1], "duration_s": row[2], "interrupted": bool(row[3])}
        for key, text in zip(("machine", "versions", "settings", "ceilings"), row[4:8], strict=True):
            value = _loads(text, f"run {run_id}'s {key}", self.path)
            if not isinstance(value, dict):
                raise _damaged(self.path, f"run {run_id}'s {key} is not an object")
            doc[key] = value
        rows = [_loads(text, f"result {rid} of run {run_id}", self.path) for rid, text in result_rows]
        if not all(isinstance(r, dict) for r in rows):
            raise _damaged(self.path, f"a result of run {run_id} is not an object")
        doc["results"] = rows
        return doc

    def latest_ceilings(self, device_name: str | None = None, host: str | None = None) -> dict[str, Any] | None:
        """This host's latest measured GPU ceilings, e.g. ``{"device": "NVIDIA H200", "bandwidth_gbps": 4175.0,
        "bf16_tflops": 750.0}`` (GEMM rates: the best ok cuda row per dtype), or None when there are none."""
        host = host or socket.gethostname()
        with self._reading() as con:
            if con is None or not {"runs", "results"} <= tables(con):
                return None
            runs = con.execute("SELECT id, hostname, ceilings_json FROM runs ORDER BY id DESC").fetchall()
            for run_id, hostname, ceilings_json in runs:
                ceilings = json.loads(ceilings_json or "{}") if _is_json(ceilings_json) else {}
                gpu = ceilings.get("gpu_name") if isinstance(ceilings, dict) else None
                if hostname not in (None, host) or not gpu:
                    continue
                if device_name and device_name.lower() not in str(gpu).lower():
                    continue
                found: dict[str, Any] = {"device": str(gpu)}
                if ceilings.get("d2d_copy_gbps"):
                    found["bandwidth_gbps"] = float(ceilings["d2d_copy_gbps"])
                gemm = con.execute(
                    "SELECT row_json FROM results WHERE run_id = ? AND workload = 'gemm' AND device = 'cuda'"
                    " AND status = 'ok'",
                    (run_id,),
                ).fetchall()
                for (row_json,) in gemm:
                    row = json.loads(row_json) if _is_json(row_json) else None
                    if not isinstance(row, dict) or not isinstance(row.get("tflops"), int | float):
                        continue
                    key = f"{row.get('dtype')}_tflops"
                    if float(row["tflops"]) > found.get(key, 0.0):
                        found[key] = float(row["tflops"])  # the largest size's rate: closest to the ceiling
                return found if len(found) > 1 else None
        return None

    # --- plan validations ---

    def save_validation(self, record: Mapping[str, Any]) -> int:
        """One `plan --measure` predicted/measured pair."""
        with self._writing() as con:
            cur = con.execute(
                "INSERT INTO plan_validations (created_at, host, device, model, task, predicted_allocated_bytes,"
                " measured_allocated_bytes, predicted_time_s, measured_time_s, record_json)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                (time.time(), socket.gethostname(), record.get("device"), record.get("model"), record.get("task"),
                 record.get("predicted_allocated_bytes"), record.get("measured_allocated_bytes"),
                 record.get("predicted_time_s"), record.get("measured_time_s"), dumps(record)),
            )  # fmt: skip
        return int(cur.lastrowid or 0)

    def validations(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Saved plan validations, newest first: each record plus ``id`` and ``created_at`` (Unix seconds)."""
        return self._records("plan_validations", limit)

    # --- load tests (gpukit loadtest) ---

    def save_loadtest(self, record: Mapping[str, Any]) -> int:
        """One load-test result (a JSON-serialisable dict), stored with its time and ``record["url"]``."""
        with self._writing() as con:
            cur = con.execute(
                "INSERT INTO loadtests (created_at, url, record_json) VALUES (?, ?, ?)",
                (_now(), None if record.get("url") is None else str(record.get("url")), dumps(record)),
            )
        return int(cur.lastrowid or 0)

    def loadtests(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Saved load tests, newest first: each saved dict plus ``id`` and ``created_at`` (ISO 8601 UTC)."""
        return self._records("loadtests", limit)

    def _records(self, table: str, limit: int | None) -> list[dict[str, Any]]:
        with self._reading() as con:
            if con is None or table not in tables(con):
                return []
            rows = con.execute(
                f"SELECT id, created_at, record_json FROM {table} ORDER BY id DESC LIMIT ?",
                (-1 if limit is None else limit,),
            ).fetchall()
        out = []
        for rid, created, text in rows:
            value = _loads(text, f"{table} row {rid}", self.path)
            out.append({**(value if isinstance(value, dict) else {"value": value}), "id": rid, "created_at": created})
        return out


def _is_json(text: Any) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True


def _gpu_of(ceilings: Mapping[str, Any], machine: Mapping[str, Any]) -> str | None:
    if ceilings.get("gpu_name"):
        return str(ceilings["gpu_name"])
    gpus = machine.get("gpus")
    if isinstance(gpus, list) and gpus:
        first = gpus[0]
        return str(first.get("name")) if isinstance(first, dict) else str(first)
    return None
