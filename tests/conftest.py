"""Shared fixtures: a CLI runner that calls ``gpukit.cli.main`` in-process and captures its output."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest

# Never let a developer's own history or GPU selection leak into tests.
os.environ.pop("GPUKIT_DB", None)


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
