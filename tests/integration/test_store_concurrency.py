"""16 processes writing at once into one store, SQLite and PostgreSQL: afterwards every run and every acceptance is
there, each writer's in the order it wrote them, no id twice, no result row lost or attached to another run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from gpukit.history import open_history

WRITERS = 16
EACH = 12  # runs per writer (and as many acceptances): 16 x 12 x 2 = 384 transactions, a few seconds on 2 cores
WRITER = Path(__file__).with_name("store_writer.py")


def _write_at_once(db: str, tmp_path: Path) -> list[list[list[object]]]:
    start = tmp_path / "start"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), *sys.path])}
    procs = [
        subprocess.Popen([sys.executable, str(WRITER), db, f"node-{i:02d}", str(EACH), str(start)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for i in range(WRITERS)
    ]  # fmt: skip
    time.sleep(0.5)  # most of them are waiting at the start line by now; the rest join the race late
    start.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    return outs


def test_sixteen_writers_at_once_on_a_new_store(store_url: str, tmp_path: Path) -> None:
    """Nobody created the schema first: every writer finds an empty store and migrates it (one at a time, under
    the lock), then they all race to write."""
    t0 = time.perf_counter()
    outs = _write_at_once(store_url, tmp_path)
    elapsed = time.perf_counter() - t0
    with open_history(store_url, create=False) as h:
        runs = h.list_runs(limit=None)
        accs = h.acceptances()
        assert len(runs) == WRITERS * EACH and len(accs) == WRITERS * EACH, elapsed
        assert len({r.id for r in runs}) == len(runs) and len({a["id"] for a in accs}) == len(accs)
        assert sorted(i for out in outs for k, i in out if k == "run") == sorted(r.id for r in runs)
        by_writer: dict[str, list[int]] = defaultdict(list)
        for r in sorted(runs, key=lambda r: r.id):
            doc = h.load_run(r.id)
            assert doc["node"]["name"] == r.node and len(doc["results"]) == 3
            assert {row["size"] for row in doc["results"]} == {str(doc["settings"]["seq"])}
            by_writer[str(r.node)].append(int(doc["settings"]["seq"]))
        assert by_writer == {f"node-{i:02d}": list(range(EACH)) for i in range(WRITERS)}  # all, in order, once
        acc_by: dict[str, list[int]] = defaultdict(list)
        for a in sorted(accs, key=lambda a: a["id"]):
            acc_by[a["node"]["name"]].append(a["seq"])
        assert acc_by == {f"node-{i:02d}": list(range(EACH)) for i in range(WRITERS)}
        latest = h.latest_acceptances()
        assert [(a["node"]["name"], a["seq"]) for a in latest] == [(f"node-{i:02d}", EACH - 1) for i in range(WRITERS)]
    for out in outs:  # each writer's own ids rise: what it wrote later has a later id
        for kind in ("run", "acceptance"):
            mine = [i for k, i in out if k == kind]
            assert mine == sorted(mine) and len(set(mine)) == EACH
