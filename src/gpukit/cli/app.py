"""Builds the typer app from the command modules; each module owns one command group."""

from __future__ import annotations

import importlib

import typer

# Each module defines ``register(app: typer.Typer) -> None`` and keeps heavy imports inside its commands,
# so ``gpukit --help`` stays fast.
COMMAND_MODULES = ("info", "doctor", "bench", "history", "report", "plan", "train", "serve")


def build_app() -> typer.Typer:
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

    for name in COMMAND_MODULES:
        module = importlib.import_module(f"gpukit.cli.{name}")
        module.register(app)
    return app
