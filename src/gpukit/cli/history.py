"""`gpukit history`: list past bench runs, show one, compare two (ratios, with a noise call from the spread)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpukit.cli import render

DB_HELP = "Results history file (default: $GPUKIT_DB or ~/.local/share/gpukit/results.db)."


def _list(db: Path | None, limit: int, as_json: bool) -> int:
    from gpukit.bench.store import Store

    store = Store(db)
    runs = store.list_runs(limit)
    if as_json:
        render.print_json({"db": str(store.path), "runs": [r.to_dict() for r in runs]})
        return 0
    if not runs:
        render.console.print(f"no runs in {store.path} yet — run: gpukit bench --quick")
        return 0
    rows = [
        [
            str(r.id),
            r.started_at,
            render.fmt_seconds(r.duration_s),
            r.hostname or render.NA,
            r.gpu or "—",
            " ".join(r.workloads) + (" (quick)" if r.quick else ""),
            f"{r.n_ok}/{r.n_total}",
        ]
        for r in runs
    ]
    render.console.print(
        render.table(
            ["id", "started (UTC)", "took", "host", "GPU", "workloads", "ok rows"], rows, title=f"Runs in {store.path}"
        )
    )
    return 0


def show(
    run_id: int = typer.Argument(..., help="Run id (see gpukit history)."),
    db: Path = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON."),
) -> int:
    """Show one run: its ceilings and every row."""
    from gpukit.bench.store import Store
    from gpukit.cli.bench_render import print_run

    run = Store(db).load(run_id)
    if as_json:
        render.print_json(run.to_dict())
    else:
        render.console.print(f"run {run.id}: {run.started_at} on {run.machine.get('hostname', render.NA)}")
        print_run(run)
    return 0


def compare(
    run_a: int = typer.Argument(..., help="Run A (the reference)."),
    run_b: int = typer.Argument(..., help="Run B (compared against A)."),
    db: Path = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> int:
    """Compare run B with run A row by row: throughput ratio B/A; smaller than the spread is called noise."""
    from gpukit.bench.compare import compare_runs
    from gpukit.bench.results import THROUGHPUT_UNITS
    from gpukit.bench.store import Store

    store = Store(db)
    rows = compare_runs(store.load(run_a), store.load(run_b))
    if as_json:
        render.print_json({"a": run_a, "b": run_b, "rows": [r.to_dict() for r in rows]})
        return 0
    table_rows = []
    for c in rows:
        unit = THROUGHPUT_UNITS[c.unit][1] if c.unit in THROUGHPUT_UNITS else ""
        table_rows.append(
            [
                c.workload,
                c.backend,
                c.device,
                c.size,
                render.fmt(c.a, ",.4g", unit),
                render.fmt(c.b, ",.4g", unit),
                render.fmt(c.ratio, ".3f", "×"),
                render.fmt(c.spread * 100 if c.spread is not None else None, ".0f", "%"),
                c.verdict,
            ]
        )
    render.console.print(
        render.table(
            [
                "workload",
                "backend",
                "device",
                "size",
                f"A (run {run_a})",
                f"B (run {run_b})",
                "B/A",
                "spread",
                "verdict",
            ],
            table_rows,
            title="Comparison (throughput; a change within the spread is noise)",
        )
    )
    return 0


def register(app: typer.Typer) -> None:
    """Add `gpukit history` with `show` and `compare`."""
    group = typer.Typer(help="The results history of gpukit bench: list runs, show one, compare two.")

    @group.callback(invoke_without_command=True)
    def history(
        ctx: typer.Context,
        db: Path = typer.Option(None, "--db", help=DB_HELP),
        limit: int = typer.Option(50, "--limit", min=1, help="How many runs to list."),
        as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
    ) -> int | None:
        """List past runs (newest first)."""
        if ctx.invoked_subcommand is None:
            return _list(db, limit, as_json)
        return None

    group.command("show")(show)
    group.command("compare")(compare)
    app.add_typer(group, name="history")
