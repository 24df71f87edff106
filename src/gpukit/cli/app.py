"""Builds the typer app from the command modules; each module owns one command group."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import typer

# Each module defines ``register(app: typer.Typer) -> None`` and keeps heavy imports inside its commands,
# so ``gpukit --help`` stays fast.
COMMAND_MODULES = ("info", "doctor", "bench", "history", "report", "plan", "train", "serve", "accept", "fleet")
# A command whose module is known builds an app of that module alone: `gpukit train …` skipped nothing it needs and
# imported the bench package (the measuring engine) and the serve/plan modules besides, ~0.5 s of every run's
# start-up. Anything else (root --help, --version, an unknown name) builds the whole app.
_OWN_MODULE = {"train": "train", "predict": "train", "export": "train", "accept": "accept", "fleet": "fleet"}


def build_app(argv: Sequence[str] | None = None) -> typer.Typer:
    app = typer.Typer(
        name="gpukit",
        help="A GPU survival toolkit: what you have, whether it is set up right, how much faster it really is, "
        "what your model needs, and how to train and serve it. Every number is checked.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback(invoke_without_command=True)
    def _root(
        version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    ) -> None:
        if version:
            from gpukit import __version__
            from gpukit.cli import render

            render.console.print(f"gpukit {__version__}")
            raise typer.Exit(0)

    first = argv[0] if argv else None
    for name in (_OWN_MODULE[first],) if first in _OWN_MODULE else COMMAND_MODULES:
        module = importlib.import_module(f"gpukit.cli.{name}")
        module.register(app)
    return app
