"""The history through the CLI: a bad --db is refused before measuring, a save that fails leaves a file to
import, damaged files print error/hint (never a traceback), and `plan --measure` then `bench` share one file."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from gpukit.errors import StoreError
from gpukit.history import History, open_history

TINY = ("bench", "vector-add", "-b", "numpy", "--quick", "--no-ceilings", "--size", "1MiB")


def _refused(res: object, match: str) -> None:
    assert res.exit_code == 2, res.stderr  # type: ignore[attr-defined]
    err = " ".join(res.stderr.split())  # type: ignore[attr-defined]  (rich wraps long lines)
    assert "error:" in err and "hint:" in err and match in err
    assert "Traceback" not in res.stderr + res.stdout  # type: ignore[attr-defined]


def test_bad_db_is_refused_before_measuring(run_cli, tmp_path: Path) -> None:
    (tmp_path / "junk.db").write_bytes(b"garbage" * 1000)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    for db, match in ((tmp_path, "is a directory"), (tmp_path / "junk.db", "not an SQLite"),
                      (other, "not a gpukit results history")):  # fmt: skip
        t0 = time.perf_counter()
        # the default workloads with ceilings would take a minute here: refused first, in well under a second
        res = run_cli("bench", "--quick", "--db", str(db))
        assert time.perf_counter() - t0 < 1.0
        _refused(res, match)
    _refused(run_cli("plan", "seed-cnn", "--measure", "--db", str(tmp_path / "junk.db")), "not an SQLite")


def test_a_failed_save_is_kept_and_imported(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "r.db"

    def full_disk(self: History, run: object) -> int:
        raise StoreError(f"cannot write the results history {self.path}: database or disk is full")

    monkeypatch.setattr(History, "save_run", full_disk)
    res = run_cli(*TINY, "--db", str(db))
    assert res.exit_code == 2 and "disk is full" in res.stderr and "gpukit history import" in res.stderr
    assert "vector-add" in res.stdout  # the report still printed
    (kept,) = tmp_path.glob("r.db.unsaved-*-bench_run.json")
    monkeypatch.undo()
    res = run_cli("history", "import", str(kept), "--db", str(db), "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["id"] == 1
    listed = run_cli("history", "list", "--db", str(db), "--json")
    assert [r["workloads"] for r in json.loads(listed.stdout)["runs"]] == [["vector-add"]]
    shown = run_cli("history", "show", "1", "--db", str(db), "--json")
    assert json.loads(shown.stdout)["results"][0]["backend"] == "numpy"
    _refused(run_cli("history", "import", str(tmp_path / "none.json"), "--db", str(db)), "no such file")


def test_damaged_history_prints_error_and_hint(run_cli, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert run_cli(*TINY, "--db", str(db)).exit_code == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE results SET row_json = '{oops'")
    con.commit()
    _refused(run_cli("history", "show", "1", "--db", str(db)), "damaged")
    _refused(run_cli("report", "--db", str(db), "-o", str(tmp_path / "r.html")), "damaged")
    con.execute("UPDATE runs SET settings_json = 'x'")
    con.commit()
    _refused(run_cli("history", "--db", str(db)), "damaged")
    con.execute("UPDATE results SET row_json = '{\"workload\": 1}'")  # JSON, but not a result row
    con.execute("UPDATE runs SET settings_json = '{}'")
    con.commit()
    _refused(run_cli("history", "show", "1", "--db", str(db)), "damaged")
    con.execute("DROP TABLE results")
    con.commit()
    con.close()
    _refused(run_cli("history", "list", "--db", str(db)), "no table results")


def test_plan_validation_then_bench_share_one_file(run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fresh machine (XDG_DATA_HOME set, no --db) `plan --measure`'s record and the next bench land in the
    same, valid history."""
    from gpukit.plan.measure import save_validation

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    path = save_validation({"device": "NVIDIA H200", "model": "gpt2", "task": "train"})
    assert Path(path) == tmp_path / "xdg" / "gpukit" / "results.db"  # where it is: a path, or a redacted URL
    assert run_cli(*TINY).exit_code == 0
    with open_history(path, create=False) as h:
        assert [v["model"] for v in h.validations()] == ["gpt2"] and len(h.list_runs()) == 1
