"""The results history on real SQLite files: paths, validation before measuring, locks, damage, migrations, the
record kinds (bench runs, plan validations, load tests) and the fallback file when saving fails."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from gpukit.errors import ConfigError, StoreError
from gpukit.history import SCHEMA_VERSION, default_db_path, import_file, open_history, write_fallback


def _run_doc(gbps: float = 10.0, host: str = "node1") -> dict[str, object]:
    return {
        "started_at": "2026-11-30T05:00:00Z",
        "duration_s": 1.5,
        "interrupted": False,
        "machine": {"hostname": host},
        "versions": {"numpy": "2.4.6"},
        "settings": {"workloads": ["vector-add"], "quick": True},
        "ceilings": {"gpu_name": "NVIDIA H200", "d2d_copy_gbps": 4175.0},
        "results": [
            {"workload": "vector-add", "backend": "numpy", "device": "cpu", "size": "1MiB:float32", "status": "ok",
             "kernel_median_s": 1e-3, "gbps": gbps},
            {"workload": "gemm", "backend": "torch-cuda", "device": "cuda", "size": "8192", "status": "ok",
             "dtype": "bf16", "tflops": 750.0},
            {"workload": "gemm", "backend": "torch-cuda", "device": "cuda", "size": "8192", "status": "failed",
             "dtype": "fp8", "tflops": 9999.0},
        ],
    }  # fmt: skip


def _tables(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        con.close()


def test_round_trip_listing_and_empty_history(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.db"
    with open_history(path, create=False) as h:
        assert h.list_runs() == [] and h.loadtests() == [] and h.latest_ceilings() is None
    assert not path.exists()  # reading a missing history creates nothing
    with open_history(path) as h:
        doc = _run_doc()
        run_id = h.save_run(doc)
        assert run_id == 1
        loaded = h.load_run(run_id)
        assert loaded["results"] == doc["results"] and loaded["settings"] == doc["settings"]
        assert (loaded["id"], loaded["duration_s"]) == (1, 1.5)
        s = h.list_runs()[0]
        assert (s.id, s.n_ok, s.n_total, s.gpu, s.quick, s.workloads) == (1, 2, 3, "NVIDIA H200", True, ["vector-add"])
        with pytest.raises(ConfigError, match="no run 99"):
            h.load_run(99)


def test_default_path_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUKIT_DB", str(tmp_path / "x.db"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("GPUKIT_DB")
    assert default_db_path() == tmp_path / "xdg" / "gpukit" / "results.db"
    monkeypatch.setenv("XDG_DATA_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "gpukit" / "results.db"


def _fast_refusal(path: Path, match: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=match) as info:
        open_history(path)
    assert time.perf_counter() - t0 < 1.0 and info.value.hint and "--db" in info.value.hint


def test_bad_paths_are_refused_fast_with_a_hint(tmp_path: Path) -> None:
    _fast_refusal(tmp_path, "is a directory")
    (tmp_path / "junk.db").write_bytes(b"not sqlite at all " * 100)
    _fast_refusal(tmp_path / "junk.db", "not an SQLite file")
    (tmp_path / "afile").write_text("x")
    _fast_refusal(tmp_path / "afile" / "results.db", "cannot create the folder")


def test_foreign_and_newer_files_are_refused_untouched(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    sqlite3.connect(app).execute("CREATE TABLE notes (body TEXT)").connection.commit()
    _fast_refusal(app, "not a gpukit results history")
    assert _tables(app) == ["notes"]
    newer = tmp_path / "newer.db"
    con = sqlite3.connect(newer)
    con.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); CREATE TABLE runs_v9 (id INTEGER);")
    con.execute("INSERT INTO meta VALUES ('schema_version', '9')")
    con.commit()
    con.close()
    before = _tables(newer)
    _fast_refusal(newer, "schema 9")
    assert _tables(newer) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_read_only_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    open_history(path).close()
    path.chmod(0o444)
    _fast_refusal(path, "read-only")
    with open_history(path, create=False) as h:  # reading it is fine
        assert h.list_runs() == []


def test_a_lock_is_waited_for_then_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    h = open_history(path, busy_timeout_s=10.0)
    impatient = open_history(path, busy_timeout_s=0.3)
    other = sqlite3.connect(path, check_same_thread=False)
    other.execute("BEGIN EXCLUSIVE")  # another gpukit in the middle of a write
    release = threading.Timer(1.0, other.rollback)
    release.start()
    t0 = time.perf_counter()
    assert h.save_run(_run_doc()) == 1  # waited for the lock (sqlite's default 5 s would do for 1 s; 6 s lost runs)
    assert time.perf_counter() - t0 >= 0.9
    release.join()
    other.execute("BEGIN EXCLUSIVE")
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match="stayed locked"):
        open_history(path, busy_timeout_s=0.3)
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(StoreError, match="locked"):  # opened before the lock: the save is what fails
        impatient.save_run(_run_doc())
    other.rollback()
    other.close()
    h.close()
    impatient.close()


def _break(path: Path, sql: str) -> None:
    con = sqlite3.connect(path)
    con.execute(sql)
    con.commit()
    con.close()


def test_damaged_histories_are_config_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with open_history(path) as h:
        h.save_run(_run_doc())
        h.save_loadtest({"url": "http://x"})
    _break(path, "UPDATE results SET row_json = '{not json' WHERE id = 1")
    with open_history(path, create=False) as h, pytest.raises(ConfigError, match="damaged: result 1 of run 1"):
        h.load_run(1)
    _break(path, "UPDATE runs SET settings_json = '[1, 2'")
    with open_history(path, create=False) as h, pytest.raises(ConfigError, match="damaged"):
        h.list_runs()
    _break(path, "UPDATE loadtests SET record_json = 'x'")
    with open_history(path, create=False) as h, pytest.raises(ConfigError, match="damaged"):
        h.loadtests()
    _break(path, "DROP TABLE results")
    with pytest.raises(ConfigError, match="damaged: no table results"):
        open_history(path, create=False)


def test_a_malformed_page_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with open_history(path) as h:
        for _ in range(40):
            h.save_run(_run_doc())
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    data[2 * page : len(data)] = b"\xff" * (len(data) - 2 * page)  # every page after the schema's
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match=r"damaged|not an SQLite"), open_history(path, create=False) as h:
        h.list_runs()
        h.load_run(1)


def test_legacy_plan_file_and_v1_file_are_migrated(tmp_path: Path) -> None:
    legacy = tmp_path / "plan.db"  # what `plan --measure` wrote before: one table, no meta stamp
    _break(legacy, "CREATE TABLE plan_validations (id INTEGER PRIMARY KEY, created_at REAL, host TEXT, device TEXT, "
                   "model TEXT, task TEXT, predicted_allocated_bytes INTEGER, measured_allocated_bytes INTEGER, "
                   "predicted_time_s REAL, measured_time_s REAL, record_json TEXT)")  # fmt: skip
    _break(legacy, """INSERT INTO plan_validations (model, record_json) VALUES ('gpt2', '{"model": "gpt2"}')""")
    with open_history(legacy) as h:
        assert h.save_run(_run_doc()) == 1  # the next `gpukit bench` works on it
        assert [v["model"] for v in h.validations()] == ["gpt2"]
    v1 = tmp_path / "v1.db"
    from gpukit.history.schema import _V1

    con = sqlite3.connect(v1)
    con.executescript(_V1.format(pk="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL"))
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.commit()
    con.close()
    with open_history(v1) as h:
        h.save_loadtest({"url": "http://a"})
    assert {"loadtests", "plan_validations"} <= set(_tables(v1))
    row = sqlite3.connect(v1).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert row == (str(SCHEMA_VERSION),)


def test_loadtests_and_validations_newest_first(tmp_path: Path) -> None:
    with open_history(tmp_path / "r.db") as h:
        first = h.save_loadtest({"url": "http://127.0.0.1:8000/predict", "rps": 100.0, "p50_ms": 1.5})
        second = h.save_loadtest({"url": "http://b", "rps": float("nan")})
        got = h.loadtests()
        assert [g["id"] for g in got] == [second, first]
        assert got[1]["rps"] == 100.0 and got[1]["url"].endswith("/predict") and got[0]["rps"] is None
        assert got[0]["created_at"].endswith("Z") and len(h.loadtests(limit=1)) == 1
        h.save_validation({"device": "NVIDIA H200", "model": "gpt2", "task": "train", "measured_allocated_bytes": 11})
        assert h.validations()[0]["measured_allocated_bytes"] == 11
    con = sqlite3.connect(tmp_path / "r.db")
    assert con.execute("SELECT url FROM loadtests ORDER BY id").fetchall() == [("http://127.0.0.1:8000/predict",),
                                                                                ("http://b",)]  # fmt: skip


def test_latest_ceilings_of_this_host(tmp_path: Path) -> None:
    import socket

    with open_history(tmp_path / "r.db") as h:
        h.save_run(_run_doc(host=socket.gethostname()))
        h.save_run(_run_doc(host="another-node"))  # newer, but not this machine's
        found = h.latest_ceilings()
        assert found == {"device": "NVIDIA H200", "bandwidth_gbps": 4175.0, "bf16_tflops": 750.0}
        assert h.latest_ceilings(device_name="A100") is None


def test_fallback_file_then_import(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    kept = write_fallback(db, "bench_run", _run_doc(gbps=42.0))
    assert kept.parent == tmp_path and kept.name.startswith("r.db.unsaved-") and kept.suffix == ".json"
    with open_history(db) as h:
        kind, new_id = import_file(h, kept)
        assert (kind, new_id) == ("bench_run", 1)
        assert h.load_run(1)["results"][0]["gbps"] == 42.0
        (tmp_path / "bad.json").write_text(json.dumps({"kind": "bench_run"}))
        with pytest.raises(ConfigError, match="not a gpukit history record"):
            import_file(h, tmp_path / "bad.json")
        with pytest.raises(ConfigError, match="is a directory"):
            import_file(h, tmp_path)
        with pytest.raises(ConfigError, match="no such file"):
            import_file(h, tmp_path / "none.json")


def test_read_only_file_is_refused_even_for_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same refusal when the file opens read-only for a reason permissions do not show (root, a read-only
    mount): the write probe, not os.access, is what decides."""
    import gpukit.history.dialect as store

    path = tmp_path / "r.db"
    open_history(path).close()
    real = sqlite3.connect
    monkeypatch.setattr(
        store.sqlite3,
        "connect",
        lambda p, timeout, isolation_level: real(f"file:{p}?mode=ro", uri=True, isolation_level=None),
    )
    _fast_refusal(path, "read-only")


def test_a_v2_file_reads_without_being_migrated_then_migrates_on_write(tmp_path: Path) -> None:
    """A reader (history list/show, report) of a file an older gpukit wrote sees its runs, without the node columns
    schema 3 adds and without changing the file; the first writer migrates it, keeping every run."""
    from gpukit.history.schema import _V1, _V2

    v2 = tmp_path / "v2.db"
    con = sqlite3.connect(v2)
    con.executescript((_V1 + _V2).format(pk="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL"))
    con.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    settings = json.dumps({"workloads": ["saxpy"]})
    con.execute("INSERT INTO runs (started_at, hostname, machine_json, versions_json, settings_json, ceilings_json)"
                " VALUES ('2026-11-30T05:00:00Z', 'old', '{}', '{}', ?, '{}')", (settings,))  # fmt: skip
    con.commit()
    con.close()
    with open_history(v2, create=False) as h:
        (s,) = h.list_runs()
        assert (s.hostname, s.workloads, s.node) == ("old", ["saxpy"], None)
        assert "node" not in h.load_run(s.id) and h.list_runs(node="old") == []
        assert h.previous_identity("old") is None and h.acceptances() == [] and h.latest_acceptances() == []
    assert sqlite3.connect(v2).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
    with open_history(v2, node="new") as h:
        h.save_run(_run_doc())
        assert [r.node for r in h.list_runs()] == ["new", None]
        assert h.previous_identity("new") is not None
    assert sqlite3.connect(v2).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("3",)


def test_gpukit_writers_take_turns_on_the_lock_file(tmp_path: Path) -> None:
    """Writers of one file wait for their turn on ``<file>.lock`` (polled every millisecond, fair under many
    writers), up to the busy timeout; then the save is refused as locked, nothing written."""
    import fcntl

    path = tmp_path / "r.db"
    with open_history(path, busy_timeout_s=0.3) as h:
        fd = os.open(f"{path}.lock", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another gpukit's turn
        t0 = time.perf_counter()
        with pytest.raises(StoreError, match="locked"):
            h.save_loadtest({"url": "http://a"})
        assert 0.3 <= time.perf_counter() - t0 < 2.0
        threading.Timer(0.1, os.close, (fd,)).start()  # the other's turn ends while this one waits
        assert h.save_loadtest({"url": "http://b"}) == 1
        assert [r["url"] for r in h.loadtests()] == ["http://b"]
