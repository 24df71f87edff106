"""The results history: one validated connection — an SQLite file or a PostgreSQL server the fleet shares — with
bench runs, plan validations, load tests and node acceptances.

:func:`open_history` checks the store before anything is measured (a directory, a corrupt or foreign file, a store
from a newer gpukit, a read-only file, a server that cannot be reached or refuses the credentials →
:class:`~gpukit.errors.ConfigError` with a hint) and creates it when missing. Every write is one transaction: a
writer waits up to ``busy_timeout_s`` for another gpukit's lock (SQLite), ids come from the store (unique across
every node writing at once). What a caller could not save it writes with
:func:`gpukit.history.fallback.write_fallback` and imports later. The backends differ only in :mod:`.dialect`.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from gpukit.errors import ConfigError, StoreError
from gpukit.history.dialect import Db, DbFailure, PostgresDb, SqliteDb, is_url, redact
from gpukit.history.paths import data_dir, resolve_db
from gpukit.history.schema import SCHEMA_VERSION, migrate, read_version

__all__ = ["BUSY_TIMEOUT_S", "History", "RunSummary", "dumps", "open_history"]

BUSY_TIMEOUT_S = 30.0  # how long a write waits for another gpukit's lock (sqlite's busy handler) before failing
_HINT = "pass --db PATH or --db postgresql://… (or set GPUKIT_DB) to use another store"
_HINTS = {
    "unreachable": "is the server running, and are the host and port right? (gpukit waits 10 s; "
    "?connect_timeout=N in the URL changes that)",
    "credentials": "check the user and password in the URL (or PGPASSWORD, ~/.pgpass)",
    "driver": "pip install 'gpukit[fleet]'",
    "url": "write it as postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
    "readonly": "grant this user INSERT and UPDATE on the gpukit tables, or " + _HINT,
}
_WHAT = {
    "unreachable": "cannot reach",
    "credentials": "refused the credentials for",
    "driver": "cannot open",
    "url": "bad store URL",
    "readonly": "refuses writes to",
}


def _damaged(where: str, what: str) -> ConfigError:
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
        return _damaged(where, str(failure))
    if kind in _WHAT:
        return ConfigError(f"the results store {_WHAT[kind]} {where}: {failure}", hint=_HINTS[kind])
    return ConfigError(f"cannot {doing} the results history {where}: {failure}", hint=_HINT)


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


def _loads(text: Any, what: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise _damaged(where, f"{what} is not valid JSON") from exc


def _json_or(text: Any, default: Any) -> Any:
    """``text`` parsed, or ``default`` for a damaged value (latest_ceilings skips what it cannot read)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _limit(limit: int | None) -> tuple[str, tuple[int, ...]]:
    return ("", ()) if limit is None else (" LIMIT ?", (int(limit),))


def open_history(
    db: str | Path | None = None,
    *,
    create: bool = True,
    busy_timeout_s: float = BUSY_TIMEOUT_S,
    node: str | None = None,
) -> History:
    """The history at ``db`` — a file path or a ``postgresql://`` URL (default
    :func:`~gpukit.history.default_db_path`, or ``GPUKIT_DB``), validated; created (a file with its folder, or the
    tables on the server) when missing and ``create``. With ``create=False`` a missing store is an empty history and
    nothing is created. ``node`` overrides the node name saved with each run (``--node``). Raises ConfigError
    (error + hint) for a store that cannot be a writable gpukit history."""
    h = History(resolve_db(db), busy_timeout_s, node=node)
    h._open(create)
    return h


class History:
    """An open results history. Use :func:`open_history`; close it, or use it as a context manager."""

    def __init__(self, db: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S, node: str | None = None) -> None:
        self.backend = "postgresql" if isinstance(db, str) else "sqlite"
        self.url = db if isinstance(db, str) else None
        self.location = redact(db) if isinstance(db, str) else str(db)  # what messages name (no password)
        # the file (SQLite); for a server, the name its fallback files take in gpukit's data folder
        self.path = Path(db) if isinstance(db, Path) else data_dir() / _server_file_name(db)
        self.busy_timeout_s = busy_timeout_s
        self.node_name = node
        self._identity: dict[str, Any] | None = None
        self._db: Db | None = None

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
            raise _damaged(where, f"no table {', '.join(sorted(missing))}")
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
        if not write:
            return  # a reader sees the tables there are (a missing one reads as empty); the first writer migrates
        try:
            if current < SCHEMA_VERSION:
                with db.transaction(migrating=True):  # under the lock: another node may have migrated meanwhile
                    names = db.tables()
                    current = self._check(read_version(db, names), names)
                    if current < SCHEMA_VERSION:
                        migrate(db, current)
            else:  # a write that changes nothing, rolled back: takes the write lock (waiting for another gpukit)
                with db.transaction(commit=False):  # and fails now, not after the run, on a read-only store
                    db.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
        except DbFailure as f:
            raise refusal(self.location, f, "write", self.busy_timeout_s) from f

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[Db | None]:
        """The connection (None for a history that does not exist yet); damage found while reading → ConfigError."""
        try:
            yield self._db
        except DbFailure as f:
            raise (_damaged(self.location, str(f)) if f.kind in ("damaged", "other") else refusal(
                self.location, f, "read", self.busy_timeout_s)) from f  # fmt: skip

    @contextmanager
    def _writing(self) -> Iterator[Db]:
        """One transaction; any failure → StoreError, nothing of it kept (the caller keeps the record, see
        write_fallback)."""
        if self._db is None:
            raise StoreError(
                f"the results history {self.location} was opened read-only", hint="open it with create=True"
            )
        try:
            with self._db.transaction():
                yield self._db
        except DbFailure as f:
            hint = _HINTS.get(f.kind, _HINT)
            raise StoreError(f"cannot write the results history {self.location}: {f}", hint=hint) from f

    def _has(self, db: Db | None, *names: str) -> bool:
        return db is not None and set(names) <= db.tables()

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

    # --- bench runs ---

    def save_run(self, run: Mapping[str, Any]) -> int:
        """Store one bench run (``Run.to_dict()``) with all its rows and this node's identity; returns its id."""
        run = self.stamped(run)
        machine = run.get("machine") or {}
        ceilings = run.get("ceilings") or {}
        node = run["node"]
        with self._writing() as db:
            run_id = db.insert(
                "INSERT INTO runs(started_at, duration_s, interrupted, hostname, gpu, machine_json, versions_json,"
                " settings_json, ceilings_json, node, node_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.get("started_at") or _now(),
                    run.get("duration_s"),
                    int(bool(run.get("interrupted"))),
                    str(machine.get("hostname") or node.get("hostname") or "") or None,
                    _gpu_of(ceilings, machine),
                    dumps(machine),
                    dumps(run.get("versions") or {}),
                    dumps(run.get("settings") or {}),
                    dumps(ceilings),
                    str(node.get("name") or "") or None,
                    dumps(node),
                ),
            )
            db.executemany(
                "INSERT INTO results(run_id, workload, backend, device, size, status, kernel_median_s, row_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (run_id, r.get("workload", ""), r.get("backend", ""), r.get("device", ""), r.get("size", ""),
                     r.get("status", ""), r.get("kernel_median_s"), dumps(r))
                    for r in run.get("results") or []
                ],
            )  # fmt: skip
        return run_id

    def list_runs(self, limit: int | None = 50) -> list[RunSummary]:
        """The latest ``limit`` runs, newest first."""
        with self._reading() as db:
            if not self._has(db, "runs", "results"):
                return []
            assert db is not None
            tail, params = _limit(limit)
            rows = db.execute(
                "SELECT r.id, r.started_at, r.duration_s, r.hostname, r.gpu, r.settings_json,"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id AND x.status = 'ok'),"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id)"
                " FROM runs r ORDER BY r.id DESC" + tail,
                params,
            ).fetchall()
        out = []
        for rid, started, dur, host, gpu, settings_json, n_ok, n_total in rows:
            settings = _loads(settings_json, f"run {rid}'s settings", self.location)
            settings = settings if isinstance(settings, dict) else {}
            workloads = [str(w) for w in settings.get("workloads") or []]
            quick = bool(settings.get("quick"))
            out.append(RunSummary(int(rid), started, dur, host, gpu, workloads, int(n_ok), int(n_total), quick))
        return out

    def load_run(self, run_id: int) -> dict[str, Any]:
        """Run ``run_id`` as the dict ``Run.to_dict()`` made (with ``"node"`` when the store has it). A missing
        history or run is bad input (ConfigError)."""
        where = self.location
        with self._reading() as db:
            if not self._has(db, "runs", "results"):
                raise ConfigError(f"no results history at {where}", hint="run gpukit bench first, or pass --db")
            assert db is not None
            row = db.execute(
                "SELECT id, started_at, duration_s, interrupted, machine_json, versions_json, settings_json,"
                " ceilings_json, node_json FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise ConfigError(f"no run {run_id} in {where}", hint="list runs with: gpukit history list")
            result_rows = db.execute("SELECT id, row_json FROM results WHERE run_id = ? ORDER BY id", (run_id,))
            result_rows = result_rows.fetchall()
        doc = {"id": row[0], "started_at": row[1], "duration_s": row[2], "interrupted": bool(row[3])}
        for key, text in zip(("machine", "versions", "settings", "ceilings"), row[4:8], strict=True):
            value = _loads(text, f"run {run_id}'s {key}", where)
            if not isinstance(value, dict):
                raise _damaged(where, f"run {run_id}'s {key} is not an object")
            doc[key] = value
        if row[8] is not None:
            doc["node"] = _loads(row[8], f"run {run_id}'s node", where)
        rows = [_loads(text, f"result {rid} of run {run_id}", where) for rid, text in result_rows]
        if not all(isinstance(r, dict) for r in rows):
            raise _damaged(where, f"a result of run {run_id} is not an object")
        doc["results"] = rows
        return doc

    def latest_ceilings(self, device_name: str | None = None, host: str | None = None) -> dict[str, Any] | None:
        """This host's latest measured GPU ceilings, e.g. ``{"device": "NVIDIA H200", "bandwidth_gbps": 4175.0,
        "bf16_tflops": 750.0}`` (GEMM rates: the best ok cuda row per dtype), or None when there are none."""
        host = host or socket.gethostname()
        with self._reading() as db:
            if not self._has(db, "runs", "results"):
                return None
            assert db is not None
            runs = db.execute("SELECT id, hostname, ceilings_json FROM runs ORDER BY id DESC").fetchall()
            for run_id, hostname, ceilings_json in runs:
                ceilings = _json_or(ceilings_json, {})
                gpu = ceilings.get("gpu_name") if isinstance(ceilings, dict) else None
                if hostname not in (None, host) or not gpu:
                    continue
                if device_name and device_name.lower() not in str(gpu).lower():
                    continue
                gemm = db.execute(
                    "SELECT row_json FROM results WHERE run_id = ? AND workload = 'gemm' AND device = 'cuda'"
                    " AND status = 'ok'",
                    (run_id,),
                ).fetchall()
                found = _ceilings(str(gpu), ceilings, [_json_or(t, None) for (t,) in gemm])
                return found if len(found) > 1 else None
        return None

    # --- plan validations ---

    def save_validation(self, record: Mapping[str, Any]) -> int:
        """One `plan --measure` predicted/measured pair."""
        with self._writing() as db:
            return db.insert(
                "INSERT INTO plan_validations (created_at, host, device, model, task, predicted_allocated_bytes,"
                " measured_allocated_bytes, predicted_time_s, measured_time_s, record_json)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                (time.time(), socket.gethostname(), record.get("device"), record.get("model"), record.get("task"),
                 record.get("predicted_allocated_bytes"), record.get("measured_allocated_bytes"),
                 record.get("predicted_time_s"), record.get("measured_time_s"), dumps(record)),
            )  # fmt: skip

    def validations(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Saved plan validations, newest first: each record plus ``id`` and ``created_at`` (Unix seconds)."""
        return self._records("plan_validations", limit)

    # --- load tests (gpukit loadtest) ---

    def save_loadtest(self, record: Mapping[str, Any]) -> int:
        """One load-test result (a JSON-serialisable dict), stored with its time and ``record["url"]``."""
        with self._writing() as db:
            return db.insert(
                "INSERT INTO loadtests (created_at, url, record_json) VALUES (?, ?, ?)",
                (_now(), None if record.get("url") is None else str(record.get("url")), dumps(record)),
            )

    def loadtests(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Saved load tests, newest first: each saved dict plus ``id`` and ``created_at`` (ISO 8601 UTC)."""
        return self._records("loadtests", limit)

    # --- node acceptances (gpukit accept) ---

    def save_acceptance(self, record: Mapping[str, Any]) -> int:
        """One acceptance document (``gpukit accept --json``), whole, in one transaction; stamped with this node's
        identity when it carries none. Returns its id."""
        record = self.stamped(record)
        node = record["node"]
        name = str(node.get("name") or "").strip()
        if not name:
            raise ConfigError("the acceptance record names no node", hint="give --node NAME")
        with self._writing() as db:
            return db.insert(
                "INSERT INTO acceptances (created_at, node, started_at, verdict, stack_key, record_json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (_now(), name, record.get("started_at"), record.get("verdict"), node.get("stack_key"), dumps(record)),
            )

    def acceptances(self, limit: int | None = None, node: str | None = None) -> list[dict[str, Any]]:
        """Saved acceptances, newest first (of one node when ``node``): each document plus ``id`` and
        ``created_at`` (ISO 8601 UTC)."""
        where, params = (" WHERE node = ?", (node,)) if node is not None else ("", ())
        return self._records("acceptances", limit, where, params)

    def latest_acceptances(self) -> list[dict[str, Any]]:
        """The newest acceptance of each node, by node name: one indexed lookup per node, not a scan of JSON."""
        return self._select(
            "acceptances",
            "SELECT a.id, a.created_at, a.record_json FROM acceptances a"
            " JOIN (SELECT node, MAX(id) AS id FROM acceptances GROUP BY node) m ON a.id = m.id ORDER BY a.node",
            (),
        )

    def previous_identity(self, node: str, before_id: int | None = None) -> dict[str, Any] | None:
        """The identity ``node`` had in its newest saved acceptance (before id ``before_id`` when given), else in
        its newest bench run; None when the store has never seen it. `accept` compares it with the node's identity
        now to name the GPUs that changed (:func:`gpukit.hardware.identity.identity_changes`)."""
        bound, params = ("", (node,)) if before_id is None else (" AND id < ?", (node, int(before_id)))
        for table, column in (("acceptances", "record_json"), ("runs", "node_json")):
            with self._reading() as db:
                if not self._has(db, table):
                    continue
                assert db is not None
                row = db.execute(
                    f"SELECT id, {column} FROM {table} WHERE node = ?{bound} ORDER BY id DESC LIMIT 1", params
                ).fetchone()
            if row is not None:
                doc = _loads(row[1], f"{table} row {row[0]}", self.location)
                found = doc.get("node") if table == "acceptances" and isinstance(doc, dict) else doc
                if isinstance(found, dict):
                    return found
        return None

    def _records(
        self, table: str, limit: int | None, where: str = "", params: tuple[Any, ...] = ()
    ) -> list[dict[str, Any]]:
        tail, lim = _limit(limit)
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
            value = _loads(text, f"{table} row {rid}", self.location)
            value = value if isinstance(value, dict) else {"value": value}
            out.append({**value, "id": int(rid), "created_at": created})
        return out


def _server_file_name(url: str) -> str:
    """``postgresql://u:p@db.example:5432/fleet`` → ``postgresql-db.example-5432-fleet.db``: the stem of the fallback
    files written when that server refuses a record."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    bits = [parts.hostname or "local", str(parts.port or 5432), parts.path.strip("/") or "postgres"]
    safe = "-".join("".join(c if c.isalnum() or c in "._" else "_" for c in b) for b in bits)
    return f"postgresql-{safe}.db"


def _ceilings(gpu: str, ceilings: Mapping[str, Any], gemm_rows: list[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {"device": gpu}
    if ceilings.get("d2d_copy_gbps"):
        found["bandwidth_gbps"] = float(ceilings["d2d_copy_gbps"])
    for row in gemm_rows:
        if not isinstance(row, dict) or not isinstance(row.get("tflops"), int | float):
            continue
        key = f"{row.get('dtype')}_tflops"
        if float(row["tflops"]) > found.get(key, 0.0):
            found[key] = float(row["tflops"])  # the largest size's rate: closest to the ceiling
    return found


def _gpu_of(ceilings: Mapping[str, Any], machine: Mapping[str, Any]) -> str | None:
    if ceilings.get("gpu_name"):
        return str(ceilings["gpu_name"])
    gpus = machine.get("gpus")
    if isinstance(gpus, list) and gpus:
        first = gpus[0]
        return str(first.get("name")) if isinstance(first, dict) else str(first)
    return None
