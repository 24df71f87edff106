"""How long `gpukit fleet status` takes over 64 nodes × 8 GPUs of documents as large as real ones (NVML at 2 Hz:
~180 kB a node, 12 MB in all; tests/fleet_synthetic.py), on SQLite and, when GPUKIT_TEST_PG_URL names a server, on
PostgreSQL. The design target is 2 s (the whole command, as a user runs it).

    PYTHONPATH=src python benchmarks/scripts/fleet_status_time.py OUT.md

Per store: in-process (the command's own work: `gpukit.cli.main`, modules already imported), best and median of 5
after one warm-up; and the whole command in a new process (`python -m gpukit fleet status`, interpreter start and
imports included), best and median of 3."""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "src")]

import fleet_synthetic as synth  # noqa: E402
from gpukit.cli import main  # noqa: E402
from gpukit.history import open_history  # noqa: E402
from pg_server import with_database  # noqa: E402


def _fill(db: str) -> str:
    with open_history(db) as history:
        for rec in synth.fleet(64, 8, seed=2):
            history.save_acceptance(rec)
    return db


def _in_process(db: str, n: int = 5) -> list[float]:
    times = []
    for _ in range(n + 1):
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(["fleet", "status", "--db", db]) == 0
        times.append(time.perf_counter() - t)
        assert "Fleet: 64 nodes, 512 GPUs" in out.getvalue()
    return times[1:]


def _new_process(db: str, n: int = 3) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gpukit", "fleet", "status", "--db", db], env=env, check=True,
                       capture_output=True)  # fmt: skip
        times.append(time.perf_counter() - t)
    return times


def _pg_db(admin: str) -> str:
    import psycopg

    name = f"gpukit_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    return with_database(admin, name)


def main_() -> None:
    out = Path(sys.argv[1])
    stores = {"sqlite": _fill(str(Path(tempfile.mkdtemp()) / "fleet.db"))}
    if os.environ.get("GPUKIT_TEST_PG_URL"):
        stores["postgresql"] = _fill(_pg_db(os.environ["GPUKIT_TEST_PG_URL"]))
    lines = [
        "| store | in-process best s | median s | new process best s | median s |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, db in stores.items():
        a, b = _in_process(db), _new_process(db)
        cells = [min(a), statistics.median(a), min(b), statistics.median(b)]
        lines.append(f"| {name} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")
        print(lines[-1], flush=True)
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main_()
