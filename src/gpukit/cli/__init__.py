"""The command line: a typer app, one module per command group, errors caught once here.

``main()`` returns an exit code: 0 ok, 1 a failure was found, 2 bad usage or input, 130 interrupted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import typer

from gpukit.errors import GpukitError

__all__ = ["main", "skip_teardown"]

_skip_teardown = False


def skip_teardown() -> None:
    """Let ``main()``, when it is the process's entry point, end the process with ``os._exit`` after flushing
    stdout and stderr, instead of finalizing the interpreter: after ``import torch`` that teardown alone takes
    0.8 s on a 2-core box, for nothing (``train`` calls this once its files are written and synced)."""
    global _skip_teardown
    _skip_teardown = True


def _click_exception_types() -> tuple[type[Exception], ...]:
    """Usage-error base classes: typer >= 0.20 vendors click, older typer uses the click package."""
    types: list[type[Exception]] = []
    try:
        from typer._click.exceptions import ClickException as Vendored

        types.append(Vendored)
    except ImportError:
        pass
    try:
        import click

        types.append(click.ClickException)
    except ImportError:  # pragma: no cover - one of the two always exists
        pass
    return tuple(types)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code; library errors become ``error:`` / ``hint:`` lines."""
    code = _run(list(argv) if argv is not None else sys.argv[1:])
    if argv is None and _skip_teardown:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(args: list[str]) -> int:
    from gpukit.cli import render
    from gpukit.cli.app import build_app

    app = build_app(args)
    try:
        result = app(args=args, standalone_mode=False)
    except GpukitError as exc:
        render.error(exc.message, exc.hint)
        return exc.exit_code
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except (typer.Abort, KeyboardInterrupt):
        render.error("interrupted")
        return 130
    except _click_exception_types() as exc:  # unknown option, bad value, missing argument
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show(file=sys.stderr)  # type: ignore[attr-defined]
            return 0
        # the same error: / hint: lines as every other bad input, not click's "Usage: … Error: …" block
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "gpukit"
        render.error(exc.format_message(), hint=f"see: {where} --help")  # type: ignore[attr-defined]
        return 2
    return int(result) if isinstance(result, int) else 0
