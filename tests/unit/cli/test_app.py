from __future__ import annotations

import subprocess
import sys

from gpukit import __version__
from gpukit.cli import render
from gpukit.errors import ConfigError, GpukitError, PlanError


def test_version_exits_zero(run_cli):
    result = run_cli("--version")
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_unknown_command_is_usage_error(run_cli):
    result = run_cli("no-such-command")
    assert result.exit_code == 2
    assert "no-such-command" in result.stderr


def test_python_dash_m_runs_the_same_cli():
    proc = subprocess.run(
        [sys.executable, "-m", "gpukit", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0
    assert "GPU survival toolkit" in proc.stdout


def test_error_tree_exit_codes():
    assert GpukitError("x").exit_code == 1
    assert ConfigError("x").exit_code == 2
    assert PlanError("x").exit_code == 2  # a bad planning request is bad input
    err = ConfigError("bad size '12q'", hint="use a number such as 1M")
    assert str(err) == "bad size '12q'" and err.hint == "use a number such as 1M"


def test_error_lines_go_to_stderr(capsys):
    render.error("something broke", "do this")
    out, err = capsys.readouterr()
    assert out == ""
    assert "error: something broke" in err
    assert "hint: do this" in err


def test_json_never_emits_nan(capsys):
    render.print_json({"a": float("nan"), "b": [1.0, float("inf")], "c": 2})
    out = capsys.readouterr().out
    assert '"a": null' in out and "NaN" not in out and "Infinity" not in out


def test_formatters():
    assert render.fmt(None) == "n/a"
    assert render.fmt_seconds(0.00123) == "1.23 ms"
    assert render.fmt_seconds(2.5) == "2.5 s"
    assert render.fmt_seconds(4.6e-6) == "4.6 µs"
    assert render.fmt_bytes(1536 * 1024**2) == "1.50 GiB"
