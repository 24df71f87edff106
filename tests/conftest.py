"""Shared fixtures: a CLI runner that calls ``gpukit.cli.main`` in-process and captures its output."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

# Never let a developer's own history or GPU selection leak into tests.
os.environ.pop("GPUKIT_DB", None)

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
