"""Shared fixtures: a CLI runner that calls ``gpukit.cli.main`` in-process and captures its output; the two store
backends (an SQLite file, a fresh database on a real PostgreSQL server)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from pg_server import pg_admin_url, with_database

# Never let a developer's own history or GPU selection leak into tests, nor a test write into the default history
# (~/.local/share/gpukit/results.db): the default location is a folder of this session's own.
os.environ.pop("GPUKIT_DB", None)
os.environ.pop("GPUKIT_NODE", None)
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="gpukit-tests-xdg-")
atexit.register(shutil.rmtree, os.environ["XDG_DATA_HOME"], True)

pytest_plugins = ["pytester"]  # tests/unit/bench/test_pytest_plugin.py drives pytest itself


def pytest_configure(config: pytest.Config) -> None:
    """gpukit's own pytest plugin (the ``gpukit_bench`` fixture): through its ``pytest11`` entry point when
    gpukit is installed, registered here when the tests run from a source tree."""
    import gpukit.bench.pytest_plugin as plugin

    if not config.pluginmanager.is_registered(plugin):
        config.pluginmanager.register(plugin, "gpukit")


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    from gpukit.cli import main

    def _run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return _run


# --- the shared store: a real PostgreSQL server (tests/pg_server.py says where it comes from) ---


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty database on the test server; dropped afterwards."""
    import psycopg

    admin = pg_admin_url()
    name = f"gpukit_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """A store of each backend: a path (as a str) or a URL."""
    if request.param == "sqlite":
        return str(tmp_path) + "/results.db"
    return str(request.getfixturevalue("pg_url"))
