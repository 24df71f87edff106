"""`gpukit report`: one run from the results history as a self-contained HTML page or as Markdown with PNGs."""

from __future__ import annotations

from pathlib import Path

import typer

from gpukit.cli import render
from gpukit.cli.history import db_option


def report(
    run_id: int = typer.Option(None, "--run", help="The run to report (see gpukit history)."),
    last: bool = typer.Option(False, "--last", help="Report the latest run (the default)."),
    output: Path = typer.Option(None, "--output", "-o", help="File to write (default report.html / report.md)."),
    fmt: str = typer.Option("html", "--format", "-f", help="html (one file, plots embedded) or md."),
    db: str = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print what was written (and the crossovers) as JSON."),
) -> int:
    """Write a report of one bench run: machine, ceilings, the seed claims beside what was measured, the CPU/GPU
    crossover, a roofline and every result."""
    from gpukit.bench.report import build_report, gemm_rows, to_html, to_markdown
    from gpukit.bench.results import run_from_saved
    from gpukit.cli.bench_render import write_output
    from gpukit.errors import ConfigError

    if fmt not in ("html", "md"):
        raise ConfigError(f"unknown format '{fmt}'", hint="use --format html or --format md")
    if run_id is not None and last:
        raise ConfigError("--run and --last exclude each other", hint="pick one")
    from gpukit.history import open_history

    with open_history(db, create=False) as history:
        if run_id is None:
            runs = history.list_runs(limit=1)
            if not runs:
                raise ConfigError(
                    f"no runs in {history.location}", hint="run gpukit bench (or --sweep) first, or pass --db"
                )
            run_id = runs[0].id
        run = run_from_saved(history.load_run(run_id), history.location)
    built = build_report(run)
    out = output or Path(f"report.{fmt}")
    written = [out]
    if fmt == "html":
        write_output(out, to_html(built))
    else:
        plot_dir = out.with_name(f"{out.stem}_plots")
        for p in built.plots:
            write_output(plot_dir / f"{p.name}.png", p.png)
            written.append(plot_dir / f"{p.name}.png")
        write_output(out, to_markdown(built, plot_dir.name))
    if as_json:
        render.print_json(
            {
                "run": run.id,
                "format": fmt,
                "files": [str(p) for p in written],
                "plots": [p.name for p in built.plots],
                "crossovers": [c.to_dict() for c in built.crossovers],
                "gemm": gemm_rows(run)[1],
                "claims": [{"key": c.key, "seed": c.seed, "measured": c.measured} for c in built.claims],
            }
        )
    else:
        render.console.print(f"wrote {out} (run {run.id}, {len(built.plots)} plots)", soft_wrap=True)
    return 0


def register(app: typer.Typer) -> None:
    """Add `gpukit report`."""
    app.command("report")(report)
