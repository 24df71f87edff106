"""The shared store under many writers: N processes (default 16) save runs and acceptances at once into a new SQLite
file and a new PostgreSQL database; afterwards every record must be there, each writer's in the order it wrote them,
no id twice. Writes the Markdown and JSON of STYLE.md point 10.

    PYTHONPATH=src python benchmarks/scripts/store_writers.py --pg "$(bash .ci/postgres.sh)" --out benchmarks

The writer is the concurrency test's (tests/integration/store_writer.py): one copy of what a node does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "tests" / "integration" / "store_writer.py"


def _race(db: str, writers: int, each: int, work: Path) -> float:
    """Start the writers, let them open the store, then fire; the seconds from the start to the last one done."""
    start = work / f"start-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    procs = [
        subprocess.Popen([sys.executable, str(WRITER), db, f"node-{i:02d}", str(each), str(start)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for i in range(writers)
    ]  # fmt: skip
    time.sleep(2.0)  # every writer has opened (and, the first, migrated) the store by now
    t0 = time.perf_counter()
    start.touch()
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"a writer failed: {err}")
    return time.perf_counter() - t0


def _check(db: str, writers: int, each: int) -> dict[str, Any]:
    from gpukit.history import open_history

    with open_history(db, create=False) as h:
        runs = sorted(h.list_runs(limit=None), key=lambda r: r.id)
        accs = sorted(h.acceptances(), key=lambda a: a["id"])
        seqs: dict[str, list[int]] = defaultdict(list)
        for r in runs:
            doc = h.load_run(r.id)
            seqs[str(r.node)].append(int(doc["settings"]["seq"]))
        acc_seqs: dict[str, list[int]] = defaultdict(list)
        for a in accs:
            acc_seqs[a["node"]["name"]].append(int(a["seq"]))
        t0 = time.perf_counter()
        latest = h.latest_acceptances()
        latest_s = time.perf_counter() - t0
    want = {f"node-{i:02d}": list(range(each)) for i in range(writers)}
    return {
        "runs": len(runs),
        "acceptances": len(accs),
        "unique_run_ids": len({r.id for r in runs}) == len(runs),
        "unique_acceptance_ids": len({a["id"] for a in accs}) == len(accs),
        "every_run_in_order_once": dict(seqs) == want,
        "every_acceptance_in_order_once": dict(acc_seqs) == want,
        "latest_acceptances_nodes": len(latest),
        "latest_acceptances_s": round(latest_s, 4),
    }


def _pg_database(admin: str) -> tuple[str, str]:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"gpukit_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin)
    return urlunsplit(parts._replace(path="/" + name)), name


def _measure(backend: str, db: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    wall_s = _race(db, args.writers, args.each, work)
    transactions = 2 * args.writers * args.each
    row = {"backend": backend, "writers": args.writers, "runs_per_writer": args.each,
           "acceptances_per_writer": args.each, "wall_s": round(wall_s, 3),
           "transactions_per_s": round(transactions / wall_s, 1), **_check(db, args.writers, args.each)}  # fmt: skip
    row["ok"] = all(row[k] for k in row if k.startswith(("unique", "every")))
    return row


def _markdown(doc: dict[str, Any], command: str) -> str:
    lines = [
        "# The shared store under 16 writers at once (cpu)",
        "",
        f"Date {doc['date']}; gpukit from source at {doc['commit']}; Python {doc['python']}, psycopg {doc['psycopg']}, "
        f"SQLite {doc['sqlite']}, PostgreSQL {doc['postgresql']}; {doc['cpus']} CPU cores shared with other work "
        f"(load average {doc['load_average']} at the start). Command: `{command}`. JSON: `{doc['json']}`.",
        "",
        "Each writer is a process of its own (`tests/integration/store_writer.py`): it opens the new store (the first "
        "to get the lock creates the schema), waits for the start, then saves its runs (3 result rows each) and its "
        "acceptances one transaction each, as fast as it can. Wall time: from the start to the last writer done.",
        "",
        "| backend | writers | records | wall s | transactions/s | ids unique | every record, in order, once | "
        "latest_acceptances (nodes, s) |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for r in doc["rows"]:
        order = "yes" if r["every_run_in_order_once"] and r["every_acceptance_in_order_once"] else "**no**"
        unique = "yes" if r["unique_run_ids"] and r["unique_acceptance_ids"] else "**no**"
        lines.append(f"| {r['backend']} | {r['writers']} | {r['runs']} runs + {r['acceptances']} acceptances | "
                     f"{r['wall_s']:.2f} | {r['transactions_per_s']:.0f} | {unique} | {order} | "
                     f"{r['latest_acceptances_nodes']}, {r['latest_acceptances_s']:.3f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pg", required=True, help="a PostgreSQL URL whose role may create databases")
    ap.add_argument("--out", type=Path, default=Path("benchmarks"))
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--each", type=int, default=50)
    args = ap.parse_args()
    import sqlite3

    import psycopg

    with psycopg.connect(args.pg) as con:
        pg_version = con.execute("SHOW server_version").fetchone()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        load = os.getloadavg()[0]
        rows.append(_measure("sqlite", str(work / "results.db"), args, work))
        url, name = _pg_database(args.pg)
        try:
            rows.append(_measure("postgresql", url, args, work))
        finally:
            with psycopg.connect(args.pg, autocommit=True) as con:
                con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    stem = f"store-writers_cpu_{time.strftime('%Y-%m-%d')}"
    doc = {"date": time.strftime("%Y-%m-%d"), "commit": commit.stdout.strip(), "python": platform.python_version(),
           "psycopg": psycopg.__version__, "sqlite": sqlite3.sqlite_version, "postgresql": pg_version,
           "cpus": os.cpu_count(), "load_average": round(load, 1), "json": f"benchmarks/json/{stem}.json",
           "rows": rows}  # fmt: skip
    (args.out / "json").mkdir(parents=True, exist_ok=True)
    (args.out / "json" / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    command = "PYTHONPATH=src python benchmarks/scripts/store_writers.py --pg URL --out benchmarks"
    (args.out / f"{stem}.md").write_text(_markdown(doc, command))
    print(json.dumps(rows, indent=2))
    if not all(r["ok"] for r in rows):
        raise SystemExit("a check failed: see the rows")


if __name__ == "__main__":
    main()
