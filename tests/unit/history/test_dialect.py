"""The small layer where SQLite and PostgreSQL differ, and where --db / GPUKIT_DB point."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpukit.history import default_db_path, resolve_db
from gpukit.history.dialect import PostgresDb, SqliteDb, is_url, redact


def test_urls_and_their_passwords() -> None:
    assert is_url("postgresql://u@h/db") and is_url("postgres://h/db") and is_url(" POSTGRESQL://h")
    assert not is_url("results.db") and not is_url(Path("postgresql:/h/db")) and not is_url("sqlite:///x.db")
    assert redact("postgresql://gpukit:s3cr:et@db.example:5432/fleet") == "postgresql://gpukit@db.example:5432/fleet"
    assert redact("postgresql://gpukit@db/fleet") == "postgresql://gpukit@db/fleet"
    assert (
        redact("postgresql://db/fleet?sslmode=require&password=pw")
        == "postgresql://db/fleet?sslmode=require&password=***"
    )
    assert redact("postgresql://u:pw@h:notaport/db") == "postgresql://u@h:notaport/db"  # a bad URL still prints


def test_one_query_text_for_both_drivers() -> None:
    q = "SELECT id FROM runs WHERE node = ? AND started_at LIKE '2026%' LIMIT ?"
    assert PostgresDb.sql(PostgresDb.__new__(PostgresDb), q) == (
        "SELECT id FROM runs WHERE node = %s AND started_at LIKE '2026%%' LIMIT %s"
    )
    assert SqliteDb.sql(SqliteDb.__new__(SqliteDb), q) == q
    assert "AUTOINCREMENT" in SqliteDb.pk and "IDENTITY" in PostgresDb.pk and PostgresDb.real == "DOUBLE PRECISION"


def test_where_the_store_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("GPUKIT_DB", "postgresql://gpukit@db/fleet")
    assert resolve_db(None) == "postgresql://gpukit@db/fleet"
    assert default_db_path() == tmp_path / "gpukit" / "results.db"  # the file default is never the URL
    assert resolve_db("~/x.db") == Path.home() / "x.db" and resolve_db(tmp_path / "y.db") == tmp_path / "y.db"
    assert resolve_db("postgres://other/db") == "postgres://other/db"  # --db wins over GPUKIT_DB
    monkeypatch.setenv("GPUKIT_DB", str(tmp_path / "z.db"))
    assert resolve_db(None) == tmp_path / "z.db"


def test_the_postgresql_tests_skip_here_but_fail_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from pg_server import PG_ENV, pg_admin_url

    monkeypatch.delenv(PG_ENV, raising=False)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no PostgreSQL server"):
        pg_admin_url()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="in CI these tests must run"):
        pg_admin_url()
    monkeypatch.setenv(PG_ENV, "postgresql://u@h/db")
    assert pg_admin_url() == "postgresql://u@h/db"


def test_a_url_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from gpukit.errors import ConfigError
    from gpukit.history import open_history

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(ConfigError, match="psycopg is not installed") as info:
        open_history("postgresql://u:secret@127.0.0.1:1/x")
    assert info.value.hint == "pip install 'gpukit[fleet]'" and "secret" not in info.value.message
