"""The results history: every `gpukit bench` run in SQLite (stdlib ``sqlite3``), schema versioned.

Default file ``~/.local/share/gpukit/results.db``; ``GPUKIT_DB`` or an explicit path overrides it. The file and its
folder are created on first write; reading a file that does not exist is an empty history, not an error.
Each run keeps its machine fingerprint, versions, settings and ceilings as JSON; each result row its full JSON
(samples included) next to a few indexed columns.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpukit.bench.results import Run
from gpukit.errors import ConfigError, StoreError

__all__ = ["SCHEMA_VERSION", "RunSummary", "Store", "default_path"]

SCHEMA_VERSION = 1

_SCHEMA = """
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


def default_path() -> Path:
    env = os.environ.get("GPUKIT_DB")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "gpukit" / "results.db"


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


def _gpu_of(run: Run) -> str | None:
    if run.ceilings.gpu_name:
        return run.ceilings.gpu_name
    gpus = run.machine.get("gpus") if isinstance(run.machine, dict) else None
    if isinstance(gpus, list) and gpus:
        first = gpus[0]
        return str(first.get("name")) if isinstance(first, dict) else str(first)
    return None


class Store:
    """A results history file. Use as ``Store(path)``; each call opens and closes its own connection."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()

    def _connect(self, create: bool) -> sqlite3.Connection:
        """Open the file, refusing (before anything is written to it) one from a newer gpukit or another program."""
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(self.path)
            con.execute("PRAGMA foreign_keys = ON")
            version = _schema_version(con)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"cannot open the results history {self.path}: {exc}", hint="pass --db PATH or set GPUKIT_DB"
            ) from exc
        fresh = version is None and create and con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
        if version is None and not fresh:
            con.close()
            raise StoreError(f"{self.path} is not a gpukit results history", hint="use another --db")
        if version is not None and (not version.isdigit() or int(version) > SCHEMA_VERSION):
            con.close()
            raise StoreError(
                f"{self.path} has results schema {version or 'none'}; this gpukit reads up to {SCHEMA_VERSION}",
                hint="upgrade gpukit, or use another --db",
            )
        if create:
            try:
                con.executescript(_SCHEMA)
                con.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
                con.commit()
            except sqlite3.Error as exc:
                con.close()
                raise StoreError(f"cannot write the results history {self.path}: {exc}") from exc
        return con

    def save(self, run: Run) -> int:
        """Store ``run`` with all its rows; sets and returns ``run.id``."""
        con = self._connect(create=True)
        try:
            with con:
                cur = con.execute(
                    "INSERT INTO runs(started_at, duration_s, interrupted, hostname, gpu, machine_json, versions_json,"
                    " settings_json, ceilings_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run.started_at,
                        run.duration_s,
                        int(run.interrupted),
                        str(run.machine.get("hostname", "")) or None,
                        _gpu_of(run),
                        _dumps(run.machine),
                        _dumps(run.versions),
                        _dumps(run.settings),
                        _dumps(run.ceilings.to_dict()),
                    ),
                )
                run_id = int(cur.lastrowid or 0)
                con.executemany(
                    "INSERT INTO results(run_id, workload, backend, device, size, status, kernel_median_s, row_json)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            run_id,
                            r.workload,
                            r.backend,
                            r.device,
                            r.size,
                            r.status,
                            r.kernel_median_s,
                            _dumps(r.to_dict()),
                        )
                        for r in run.results
                    ],
                )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write the results history {self.path}: {exc}") from exc
        finally:
            con.close()
        run.id = run_id
        return run_id

    def list_runs(self, limit: int = 50) -> list[RunSummary]:
        """The latest ``limit`` runs, newest first."""
        if not self.path.exists():
            return []
        con = self._connect(create=False)
        try:
            rows = con.execute(
                "SELECT r.id, r.started_at, r.duration_s, r.hostname, r.gpu, r.settings_json,"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id AND x.status = 'ok'),"
                " (SELECT COUNT(*) FROM results x WHERE x.run_id = r.id)"
                " FROM runs r ORDER BY r.id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        finally:
            con.close()
        out = []
        for rid, started, dur, host, gpu, settings_json, n_ok, n_total in rows:
            settings = json.loads(settings_json)
            out.append(
                RunSummary(
                    rid,
                    started,
                    dur,
                    host,
                    gpu,
                    list(settings.get("workloads", [])),
                    n_ok,
                    n_total,
                    bool(settings.get("quick")),
                )
            )
        return out

    def load(self, run_id: int) -> Run:
        """The run ``run_id`` with every row. A missing history or run is bad input (ConfigError, exit 2), like
        `gpukit report --last` on an empty history; StoreError (exit 1) is kept for a history that cannot be used."""
        if not self.path.exists():
            raise ConfigError(f"no results history at {self.path}", hint="run gpukit bench first, or pass --db")
        con = self._connect(create=False)
        try:
            row = con.execute(
                "SELECT id, started_at, duration_s, interrupted, machine_json, versions_json, settings_json,"
                " ceilings_json FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise ConfigError(f"no run {run_id} in {self.path}", hint="list runs with: gpukit history")
            results = con.execute("SELECT row_json FROM results WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        finally:
            con.close()
        return Run.from_dict(
            {
                "id": row[0],
                "started_at": row[1],
                "duration_s": row[2],
                "interrupted": bool(row[3]),
                "machine": json.loads(row[4]),
                "versions": json.loads(row[5]),
                "settings": json.loads(row[6]),
                "ceilings": json.loads(row[7]),
                "results": [json.loads(r[0]) for r in results],
            }
        )


def _schema_version(con: sqlite3.Connection) -> str | None:
    """The file's schema version, or None when it has no gpukit ``meta`` table (a new file, or not gpukit's)."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone() is None:
        return None
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return str(row[0]) if row else None


def _dumps(obj: Any) -> str:
    from math import isfinite

    def clean(o: Any) -> Any:
        if isinstance(o, float) and not isfinite(o):
            return None
        if isinstance(o, dict):
            return {str(k): clean(v) for k, v in o.items()}
        if isinstance(o, list | tuple):
            return [clean(v) for v in o]
        return o

    return json.dumps(clean(obj), default=str)
