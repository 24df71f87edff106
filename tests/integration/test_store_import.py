"""`gpukit history import STORE --db OTHER`: a node's SQLite file into a PostgreSQL store and back, each record
under the node that measured it, again without duplicates, an older file without touching it, and all or nothing."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from gpukit.history import open_history


def _fill(db: str, node: str, runs: int = 2) -> None:
    with open_history(db, node=node) as h:
        for i in range(runs):
            h.save_run({"started_at": f"2026-12-01T0{i}:00:00Z", "machine": {"hostname": f"pod-{node}"},
                        "settings": {"workloads": ["saxpy"], "i": i},
                        "results": [{"workload": "saxpy", "backend": "numpy", "device": "cpu", "size": "1MiB",
                                     "status": "ok", "gbps": 10.0 + i}]})  # fmt: skip
        h.save_validation({"model": "gpt2", "device": "cpu"})
        h.save_loadtest({"url": "http://a", "rps": 99.0}, created_at="2026-11-01T00:00:00Z")  # measured a while ago
        h.save_acceptance({"kind": "gpukit-accept", "verdict": "ok", "gpus": [], "started_at": "2026-12-01T01:00:00Z"})
        h.save_acceptance({"kind": "gpukit-accept", "verdict": "slow", "gpus": []}, created_at="2026-11-02T00:00:00Z")


def _import(run_cli, source: str, target: str) -> dict[str, int]:
    res = run_cli("history", "import", source, "--db", target, "--json")
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)["copied"]


@pytest.mark.parametrize("direction", ["sqlite-to-postgresql", "postgresql-to-sqlite"])
def test_a_store_into_another_and_again(run_cli, pg_url: str, tmp_path: Path, direction: str) -> None:
    source, target = (str(tmp_path / "node.db"), pg_url)
    if direction == "postgresql-to-sqlite":
        source, target = target, source
    _fill(source, "n1")
    with open_history(source, create=False) as h:
        want_loadtests, want_accs = h.loadtests(), h.acceptances()
    assert _import(run_cli, source, target) == {"runs": 2, "plan_validations": 1, "loadtests": 1, "acceptances": 2}
    assert _import(run_cli, source, target) == dict.fromkeys(
        ("runs", "plan_validations", "loadtests", "acceptances"), 0
    )
    _fill(source, "n1", runs=1)
    assert _import(run_cli, source, target)["runs"] == 1  # only what is new since
    with open_history(target, create=False) as h:
        runs = h.list_runs()
        assert [r.node for r in runs] == ["n1"] * 3 and [r.n_ok for r in runs] == [1, 1, 1]
        assert h.load_run(runs[-1].id)["results"][0]["gbps"] == 10.0
        assert h.load_run(runs[-1].id)["node"]["hostname"] == want_accs[0]["node"]["hostname"]
        loadtests, accs = h.loadtests(), h.acceptances()
        assert loadtests[-1]["created_at"] == want_loadtests[-1]["created_at"] == "2026-11-01T00:00:00Z"
        assert accs[-2]["created_at"] == "2026-11-02T00:00:00Z"  # the time it was measured, not imported
        assert [(a["verdict"], a["node"]["name"], a["created_at"]) for a in accs[-2:]] == [
            (a["verdict"], a["node"]["name"], a["created_at"]) for a in want_accs
        ]
    res = run_cli("history", "import", target, "--db", target)
    assert res.exit_code == 2 and "is the store being imported into" in " ".join(res.stderr.split())


def test_an_older_file_is_imported_without_being_changed(run_cli, store_url: str, tmp_path: Path) -> None:
    from gpukit.history.schema import _V1, _V2

    old = tmp_path / "old.db"
    con = sqlite3.connect(old)
    con.executescript((_V1 + _V2).format(pk="INTEGER PRIMARY KEY AUTOINCREMENT", real="REAL"))
    con.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    con.execute("INSERT INTO runs (started_at, hostname, machine_json, versions_json, settings_json, ceilings_json)"
                " VALUES ('2026-11-01T00:00:00Z', 'gpu07', '{\"hostname\": \"gpu07\"}', '{}', '{}', '{}')")  # fmt: skip
    con.commit()
    con.close()
    before = old.read_bytes()
    target = store_url if store_url.startswith("postgresql") else str(tmp_path / "t.db")
    assert _import(run_cli, str(old), target)["runs"] == 1
    assert _import(run_cli, str(old), target)["runs"] == 0  # known by its location: it has no store id
    assert old.read_bytes() == before
    with open_history(target, create=False) as h:
        (run,) = h.list_runs()
        assert run.node == "gpu07" and h.load_run(run.id)["node"]["name"] == "gpu07"  # never the importer's name


def test_an_import_the_target_refuses_half_way_leaves_nothing(run_cli, pg_url: str, tmp_path: Path) -> None:
    import psycopg

    source = str(tmp_path / "node.db")
    _fill(source, "n1")
    open_history(pg_url).close()
    role = f"gpukit_imp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        con.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}")
        con.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
        con.execute(f"REVOKE INSERT ON acceptances FROM {role}")  # runs, validations, load tests go in; then no
    try:
        parts = urlsplit(pg_url)
        url = urlunsplit(parts._replace(netloc=f"{role}:pw@{parts.hostname}:{parts.port}"))
        res = run_cli("history", "import", source, "--db", url)
        assert res.exit_code == 2 and "nothing was imported" in res.stderr and "hint:" in res.stderr
        with open_history(pg_url, create=False) as h:
            assert h.list_runs() == [] and h.validations() == [] and h.loadtests() == []
    finally:
        with psycopg.connect(pg_url, autocommit=True) as con:
            con.execute(f"DROP OWNED BY {role}")
            con.execute(f"DROP ROLE {role}")
