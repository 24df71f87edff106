"""A store that cannot be used, through the CLI and the library, on both backends: a server that cannot be reached,
wrong credentials, a schema newer than this gpukit, a store that refuses writes (at open, and in the middle of a
save) → `error:` + `hint:`, exit 2, nothing half-written, and the record kept in a file that imports later."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from gpukit.errors import ConfigError, StoreError
from gpukit.history import import_file, open_history, save_or_keep

TINY = ("bench", "vector-add", "-b", "numpy", "--quick", "--no-ceilings", "--size", "1MiB")


def _refused(res: object, *match: str) -> None:
    assert res.exit_code == 2, res.stderr  # type: ignore[attr-defined]
    err = " ".join(res.stderr.split())  # type: ignore[attr-defined]  (rich wraps long lines)
    assert "error:" in err and "hint:" in err and all(m in err for m in match), err
    assert "Traceback" not in res.stderr + res.stdout  # type: ignore[attr-defined]


def _as(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, f"{user}:{password}@{parts.hostname}:{parts.port}", parts.path, "", ""))


def _admin(url: str) -> object:
    import psycopg

    return psycopg.connect(url, autocommit=True)


@pytest.fixture
def pg_role(pg_url: str) -> Iterator[tuple[str, str]]:
    """A login role of its own on the test database (dropped afterwards): (its URL, its name)."""
    name = f"gpukit_role_{uuid.uuid4().hex[:8]}"
    with _admin(pg_url) as con:  # type: ignore[attr-defined]
        con.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'right'")
    try:
        yield _as(pg_url, name, "right"), name
    finally:
        with _admin(pg_url) as con:  # type: ignore[attr-defined]
            con.execute(f"DROP OWNED BY {name}")
            con.execute(f"DROP ROLE {name}")


def test_a_server_that_cannot_be_reached(run_cli) -> None:
    url = "postgresql://gpukit:pw@127.0.0.1:1/fleet"  # nothing listens on port 1
    t0 = time.perf_counter()
    _refused(
        run_cli(*TINY, "--db", url),
        "cannot reach the results store postgresql://gpukit@127.0.0.1:1/fleet",
        "server running",
    )
    assert time.perf_counter() - t0 < 5.0  # refused at once, before measuring
    _refused(run_cli("history", "list", "--db", url), "cannot reach")
    res = run_cli("history", "list", "--db", url)
    assert "pw" not in res.stderr  # the password is never printed


def test_wrong_credentials(run_cli, pg_role: tuple[str, str]) -> None:
    url, _ = pg_role
    wrong = url.replace(":right@", ":wrong@")
    _refused(run_cli(*TINY, "--db", wrong), "refused the credentials", "check the user and password")
    assert "wrong" not in run_cli("history", "--db", wrong).stderr


def _stamp(store: str, version: str) -> None:
    if store.startswith("postgresql"):
        with _admin(store) as con:  # type: ignore[attr-defined]
            con.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", (version,))
    else:
        con = sqlite3.connect(store)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
        con.commit()
        con.close()


def test_a_newer_schema_is_refused_untouched(run_cli, store_url: str) -> None:
    with open_history(store_url) as h:
        h.save_run({"settings": {"workloads": ["x"]}, "results": []})
    _stamp(store_url, "99")
    for args in (TINY, ("history", "list"), ("history", "show", "1")):
        _refused(
            run_cli(*args, "--db", store_url), "has results schema 99; this gpukit reads up to 3", "upgrade gpukit"
        )
    _stamp(store_url, "3")
    with open_history(store_url, create=False) as h:
        assert len(h.list_runs()) == 1  # nothing was written while it said 99


def test_a_role_that_may_only_read_is_refused_before_measuring(run_cli, pg_url: str, pg_role: tuple[str, str]) -> None:
    url, name = pg_role
    open_history(pg_url).close()
    with _admin(pg_url) as con:  # type: ignore[attr-defined]
        con.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {name}")
    _refused(run_cli(*TINY, "--db", url), "refuses writes", "grant this user INSERT and UPDATE")
    listed = run_cli("history", "list", "--db", url, "--json")  # reading is fine
    assert listed.exit_code == 0 and json.loads(listed.stdout)["runs"] == []


def _counts(store: str) -> tuple[int, int, int]:
    with open_history(store, create=False) as h:
        runs = h.list_runs(limit=None)
        return len(runs), sum(r.n_total for r in runs), len(h.acceptances())


def test_a_store_that_refuses_mid_save_keeps_the_record(
    run_cli, pg_url: str, pg_role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open works (the role may write), then the grants go: the run's rows are not half-written, the run and an
    acceptance go to fallback files, and `history import` brings them in — under the node that measured them."""
    url, name = pg_role
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    open_history(pg_url).close()
    with _admin(pg_url) as con:  # type: ignore[attr-defined]
        con.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {name}")
        con.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {name}")
    with open_history(url, node="rack3-n07") as h:
        with _admin(pg_url) as con:  # type: ignore[attr-defined]
            con.execute(f"REVOKE INSERT ON results, acceptances FROM {name}")  # runs still accepts its row
        run = {"settings": {"workloads": ["vector-add"]}, "results": [{"workload": "vector-add", "status": "ok"}]}
        run_id, kept_run, exc = save_or_keep(h, "bench_run", run)
        assert run_id is None and isinstance(exc, StoreError) and "permission denied" in exc.message
        acc_id, kept_acc, exc = save_or_keep(h, "acceptance", {"kind": "gpukit-accept", "verdict": "ok", "gpus": []})
        assert acc_id is None and exc is not None and exc.hint and "grant" in exc.hint
    assert _counts(pg_url) == (0, 0, 0)  # the runs row went back with its failed results
    assert kept_run is not None and kept_run.parent == tmp_path / "gpukit"
    assert kept_run.name.startswith(f"postgresql-127.0.0.1-{urlsplit(pg_url).port}-gpukit_test_")
    with open_history(pg_url, node="the-importer") as h:
        assert import_file(h, kept_run)[0] == "bench_run" and import_file(h, kept_acc)[0] == "acceptance"
        assert h.load_run(h.list_runs()[0].id)["node"]["name"] == "rack3-n07"
        assert h.acceptances()[0]["node"]["name"] == "rack3-n07"
    assert _counts(pg_url) == (1, 1, 1)


def test_a_locked_sqlite_file_refuses_mid_save_and_keeps_the_record(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with open_history(db, busy_timeout_s=0.2, node="n1") as h:
        other = sqlite3.connect(db)
        other.execute("BEGIN EXCLUSIVE")  # another writer that does not let go
        acc_id, kept, exc = save_or_keep(h, "acceptance", {"kind": "gpukit-accept", "verdict": "slow", "gpus": []})
        other.rollback()
        other.close()
        assert acc_id is None and exc is not None and "locked" in exc.message and kept is not None
        assert (
            kept.parent == tmp_path and kept.name.startswith("r.db.unsaved-") and kept.name.endswith("-acceptance.json")
        )
        assert h.acceptances() == []
        assert import_file(h, kept) == ("acceptance", 1)
        (doc,) = h.acceptances()
        assert (doc["verdict"], doc["node"]["name"]) == ("slow", "n1")


def test_bench_on_a_refusing_store_exits_2_after_its_report(run_cli, tmp_path: Path, monkeypatch) -> None:
    """A store that refuses the run at the save (a write lock held by another node past the busy timeout)."""
    db = tmp_path / "r.db"
    open_history(db).close()

    def locked_save(self: object, run: object) -> int:
        raise StoreError(f"cannot write the results history {db}: database is locked", hint="wait")

    monkeypatch.setattr("gpukit.history.store.History.save_run", locked_save)
    res = run_cli(*TINY, "--db", str(db), "--node", "n7")
    _refused(res, "database is locked", "gpukit history import")
    (kept,) = tmp_path.glob("r.db.unsaved-*-bench_run.json")
    assert json.loads(kept.read_text())["record"]["node"]["name"] == "n7"


def test_a_database_that_does_not_exist(run_cli, pg_url: str) -> None:
    missing = pg_url.rsplit("/", 1)[0] + "/no_such_fleet_db"
    _refused(run_cli(*TINY, "--db", missing), "does not exist on that server", "createdb NAME")


def test_bad_urls_and_names(run_cli, tmp_path: Path) -> None:
    _refused(run_cli(*TINY, "--db", "postgresql://h:notaport/db"), "bad results store URL", "postgresql://USER")
    t0 = time.perf_counter()
    _refused(run_cli("bench", "--quick", "--db", str(tmp_path / "r.db"), "--node", " "), "bad node name", "--node NAME")
    assert time.perf_counter() - t0 < 2.0 and not (tmp_path / "r.db").exists()  # before measuring, nothing made
    with pytest.raises(ConfigError, match="cannot reach"):
        open_history("postgres://u@127.0.0.1:1/x?connect_timeout=1", create=False)
