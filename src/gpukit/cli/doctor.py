"""`gpukit doctor` — is this machine set up right? Each check PASS / WARN / FAIL / SKIP with a hint; exit 1 on FAIL."""

from __future__ import annotations

import typer

from gpukit.cli import render

__all__ = ["register"]

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "SKIP": "dim"}


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the documented JSON document (docs/json-schemas.md)."),
    timeout: float = typer.Option(60.0, "--timeout", min=1.0, help="Seconds each framework import probe may take."),
) -> int:
    """Check the driver, NVML, frameworks, CUDA paths and GPU health; exit 1 when any check FAILs."""
    from gpukit.hardware.doctor import doctor as run_doctor

    report = run_doctor(probe_timeout_s=timeout)
    if json_out:
        render.print_json(report.to_dict())
    else:
        for f in report.findings:
            style = _STYLE[f.level]
            render.console.print(f"[{style}]{f.level:<4}[/] {f.check:<22} {f.message}", markup=True, soft_wrap=True)
            if f.hint and f.level != "PASS":
                render.console.print(
                    f"     {'':<22} [yellow]hint:[/] {render.hint_markup(f.hint)}", markup=True, soft_wrap=True
                )
        c = report.counts()
        render.console.print(f"\n{c['PASS']} pass, {c['WARN']} warn, {c['FAIL']} fail, {c['SKIP']} skip")
    return 1 if report.failed else 0
