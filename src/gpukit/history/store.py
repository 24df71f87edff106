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

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.history.connection import BUSY_TIMEOUT_S, Store, damaged, dumps, json_or, limit_clause, loads, utc_now
from gpukit.history.paths import resolve_db

__all__ = ["BUSY_TIMEOUT_S", "History", "RunSummary", "dumps", "open_history"]


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
    node: str | None = None  # the node's name in the store (its --node, else its hostname); None before schema 3

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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
    from gpukit.hardware.identity import node_name

    node_name(node)  # a bad --node or $GPUKIT_NODE is refused now, not after the run it would have been saved with
    h = History(resolve_db(db), busy_timeout_s, node=node)
    h._open(create)
    return h


class History(Store):
    """An open results history. Use :func:`open_history`; close it, or use it as a context manager."""

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
                    run.get("started_at") or utc_now(),
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

    def list_runs(self, limit: int | None = 50, node: str | None = None) -> list[RunSummary]:
        """The latest ``limit`` runs (of one node when ``node``), newest first."""
        with self._reading() as db:
            if not self._has(db, "runs", "results"):
                return []
            assert db is not None
            tail, params = limit_clause(limit)
            where, node_params = (f" WHERE {self._v3('r.node')} = ?", (node,)) if node is not None else ("", ())
            rows = db.execute(
                "SELECT r.id, r.started_at, r.duration_s, r.hostname, r.gpu, r.settings_json,"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id AND x.status = 'ok'),"
                f" (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id), {self._v3('r.node')}"
                f" FROM runs r{where} ORDER BY r.id DESC{tail}",
                node_params + params,
            ).fetchall()
        return [self._summary(row) for row in rows]

    def _summary(self, row: Any) -> RunSummary:
        rid, started, dur, host, gpu, settings_json, n_ok, n_total, node = row
        settings = loads(settings_json, f"run {rid}'s settings", self.location)
        settings = settings if isinstance(settings, dict) else {}
        workloads = [str(w) for w in settings.get("workloads") or []]
        quick = bool(settings.get("quick"))
        return RunSummary(int(rid), started, dur, host, gpu, workloads, int(n_ok), int(n_total), quick, node)

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
                f" ceilings_json, {self._v3('node_json')} FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise ConfigError(f"no run {run_id} in {where}", hint="list runs with: gpukit history list")
            result_rows = db.execute("SELECT id, row_json FROM results WHERE run_id = ? ORDER BY id", (run_id,))
            result_rows = result_rows.fetchall()
        doc = {"id": row[0], "started_at": row[1], "duration_s": row[2], "interrupted": bool(row[3])}
        for key, text in zip(("machine", "versions", "settings", "ceilings"), row[4:8], strict=True):
            value = loads(text, f"run {run_id}'s {key}", where)
            if not isinstance(value, dict):
                raise damaged(where, f"run {run_id}'s {key} is not an object")
            doc[key] = value
        if row[8] is not None:
            doc["node"] = loads(row[8], f"run {run_id}'s node", where)
        rows = [loads(text, f"result {rid} of run {run_id}", where) for rid, text in result_rows]
        if not all(isinstance(r, dict) for r in rows):
            raise damaged(where, f"a result of run {run_id} is not an object")
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
                ceilings = json_or(ceilings_json, {})
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
                found = _ceilings(str(gpu), ceilings, [json_or(t, None) for (t,) in gemm])
                return found if len(found) > 1 else None
        return None

    # --- plan validations ---

    def save_validation(self, record: Mapping[str, Any], *, created_at: float | None = None) -> int:
        """One `plan --measure` predicted/measured pair (``created_at``: Unix seconds, default now)."""
        created = time.time() if created_at is None else created_at
        with self._writing() as db:
            return db.insert(
                "INSERT INTO plan_validations (created_at, host, device, model, task, predicted_allocated_bytes,"
                " measured_allocated_bytes, predicted_time_s, measured_time_s, record_json)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                (created, socket.gethostname(), record.get("device"), record.get("model"), record.get("task"),
                 record.get("predicted_allocated_bytes"), record.get("measured_allocated_bytes"),
                 record.get("predicted_time_s"), record.get("measured_time_s"), dumps(record)),
            )  # fmt: skip

    def validations(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Saved plan validations, newest first: each record plus ``id`` and ``created_at`` (Unix seconds)."""
        return self._records("plan_validations", limit)

    # --- load tests (gpukit loadtest) ---

    def save_loadtest(self, record: Mapping[str, Any], *, created_at: str | None = None) -> int:
        """One load-test result (a JSON-serialisable dict), stored with its time (``created_at``, ISO 8601 UTC,
        default now) and ``record["url"]``."""
        with self._writing() as db:
            return db.insert(
                "INSERT INTO loadtests (created_at, url, record_json) VALUES (?, ?, ?)",
                (created_at or utc_now(), None if record.get("url") is None else str(record.get("url")), dumps(record)),
            )

    def loadtests(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Saved load tests, newest first: each saved dict plus ``id`` and ``created_at`` (ISO 8601 UTC)."""
        return self._records("loadtests", limit)

    # --- node acceptances (gpukit accept) ---

    def save_acceptance(self, record: Mapping[str, Any], *, created_at: str | None = None) -> int:
        """One acceptance document (``gpukit accept --json``), whole, in one transaction; stamped with this node's
        identity when it carries none. ``created_at``: ISO 8601 UTC, default now. Returns its id."""
        record = self.stamped(record)
        node = record["node"]
        name = str(node.get("name") or "").strip()
        if not name:
            raise ConfigError("the acceptance record names no node", hint="give --node NAME")
        with self._writing() as db:
            return db.insert(
                "INSERT INTO acceptances (created_at, node, started_at, verdict, stack_key, record_json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    created_at or utc_now(),
                    name,
                    record.get("started_at"),
                    record.get("verdict"),
                    node.get("stack_key"),
                    dumps(record),
                ),
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
                if not self._has(db, table) or self.version < 3:
                    continue
                assert db is not None
                row = db.execute(
                    f"SELECT id, {column} FROM {table} WHERE node = ?{bound} ORDER BY id DESC LIMIT 1", params
                ).fetchone()
            if row is not None:
                doc = loads(row[1], f"{table} row {row[0]}", self.location)
                found = doc.get("node") if table == "acceptances" and isinstance(doc, dict) else doc
                if isinstance(found, dict):
                    return found
        return None


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
