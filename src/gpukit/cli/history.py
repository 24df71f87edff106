"""`gpukit history`: list past bench runs, show one, compare two (ratios, with a noise call from the spread), and
import a run that could not be saved (the JSON file written beside the history)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpukit.cli import render

if TYPE_CHECKING:
    from gpukit.bench.results import Run

DB_HELP = ("Results store: an SQLite file, or postgresql://USER:PASSWORD@HOST/DB for one the fleet shares "
           "(default: $GPUKIT_DB, else $XDG_DATA_HOME/gpukit/results.db or ~/.local/share/…).")  # fmt: skip
NODE_HELP = "This node's name in the store (default: $GPUKIT_NODE, else the hostname: containers have random ones)."


def db_option() -> Any:
    """``--db``, the same on every command: a path or a ``postgresql://`` URL (a str: a Path would fold its //)."""
    return typer.Option(None, "--db", help=DB_HELP)


def node_option(help: str = NODE_HELP) -> Any:
    """``--node NAME``, the same on every command that saves to the store."""
    return typer.Option(None, "--node", help=help)


def _load(db: str | None, *run_ids: int) -> list[Run]:
    from gpukit.bench.results import run_from_saved
    from gpukit.history import open_history

    with open_history(db, create=False) as history:
        return [run_from_saved(history.load_run(i), history.location) for i in run_ids]


def _list(db: str | None, limit: int, as_json: bool, node: str | None = None) -> int:
    from gpukit.history import open_history

    with open_history(db, create=False) as store:
        runs = store.list_runs(limit, node=node)
    if as_json:
        render.print_json({"db": store.location, "runs": [r.to_dict() for r in runs]})
        return 0
    if not runs:
        render.console.print(f"no runs in {store.location} yet — run: gpukit bench --quick")
        return 0
    rows = [
        [
            str(r.id),
            r.started_at.replace("T", " ").rstrip("Z")[2:16],  # "26-12-01 09:27": the table fits 80 columns
            _clip(r.node or r.hostname or render.NA, 10),  # the node's name in the store (--node), else its host
            _clip((r.gpu or "—").removeprefix("NVIDIA "), 10),
            _clip(" ".join(r.workloads) + (" (quick)" if r.quick else ""), 17),
            f"{r.n_ok}/{r.n_total}",  # rows skipped here (a GPU backend on a CPU machine) are not failures
        ]
        for r in runs
    ]
    columns = ["id", "started (UTC)", "node", "GPU", "workloads", "measured"]
    render.print_table(columns, rows, title=f"Runs in {store.location}", optional=["node"])
    render.console.print("[dim]measured: rows with a verified result, of all rows (skipped rows are not failures)[/]")
    render.console.print("[dim]gpukit history show ID · gpukit history compare A B · --json for every field[/]")
    return 0


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def show(
    run_id: int = typer.Argument(..., help="Run id (see gpukit history)."),
    db: str = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON."),
) -> int:
    """Show one run: its ceilings and every row."""
    from gpukit.cli.bench_render import print_run

    (run,) = _load(db, run_id)
    if as_json:
        render.print_json(run.to_dict())
    else:
        render.console.print(f"run {run.id}: {run.started_at} on {run.machine.get('hostname', render.NA)}")
        print_run(run)
    return 0


def compare(
    run_a: int = typer.Argument(..., help="Run A (the reference)."),
    run_b: int = typer.Argument(..., help="Run B (compared against A)."),
    db: str = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    force: bool = typer.Option(False, "--force", help="Compare runs taken in different hardware states (marked)."),
) -> int:
    """Compare run B with run A row by row: SAME / FASTER / SLOWER / UNSURE from the two runs' samples and, with
    three or more other runs of a row in the history (same hardware state), how much its median moved between
    them (B/A is the throughput ratio; spread, the noise band a change must leave). Runs of different hardware
    states are refused unless --force."""
    from gpukit.bench.baselines import compare_runs, recent_runs
    from gpukit.bench.results import THROUGHPUT_UNITS
    from gpukit.history import open_history

    first, second = _load(db, run_a, run_b)
    with open_history(db, create=False) as history:
        others = recent_runs(history)
    rows = compare_runs(first, second, force=force, others=others)
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
                render.fmt(c.spread * 100 if c.spread is not None else None, ".1f", "%"),
                c.verdict + (" *" if c.state_differs else ""),
            ]
        )
    columns = [
        "workload",
        "backend",
        "device",
        "size",
        f"A (run {run_a})",
        f"B (run {run_b})",
        "B/A",
        "spread",
        "verdict",
    ]
    title = "Comparison (throughput; SAME: within the noise band; SLOWER/FASTER: beyond it, intervals apart)"
    render.print_table(columns, table_rows, title=title, optional=["device", "spread"])
    if any(c.state_differs for c in rows):
        render.console.print("[yellow]* the runs were taken in different hardware states (compared with --force)[/]")
    return 0


def list_runs(
    db: str = db_option(),
    limit: int = typer.Option(50, "--limit", min=1, help="How many runs to list."),
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
    node: str = node_option("List only the runs of this node."),
) -> int:
    """List past runs (newest first); the same as plain `gpukit history`."""
    return _list(db, limit, as_json, node)


def import_run(
    source: str = typer.Argument(..., help="A JSON file gpukit wrote when it could not save, or a whole store."),
    db: str = db_option(),
    as_json: bool = typer.Option(False, "--json", help="Print what was imported as JSON."),
) -> int:
    """Bring into the history (a file store or a PostgreSQL one) a record that could not be saved — a run, plan
    validation, load test or acceptance, kept under the node that measured it — or everything of another store
    (an SQLite file or a postgresql:// URL) not imported before."""
    from gpukit.history import import_file, open_history
    from gpukit.history.transfer import import_store, is_store

    if is_store(source):
        from gpukit.errors import ConfigError, StoreError

        with open_history(source, create=False) as src, open_history(db) as history:
            try:
                copied = import_store(history, src)
            except StoreError as exc:  # the target refused a write: nothing of the import is kept there
                raise ConfigError(f"{exc.message}; nothing was imported", hint=exc.hint) from exc
            where, origin = history.location, src.location
        if as_json:
            render.print_json({"db": where, "source": origin, "copied": copied})
        else:
            counts = ", ".join(f"{n} {table.replace('_', ' ')}" for table, n in copied.items())
            render.console.print(f"imported from {origin} into {where}: {counts}", soft_wrap=True)
        return 0
    with open_history(db) as history:
        kind, new_id = import_file(history, Path(source))
        path = history.location
    if as_json:
        render.print_json({"db": path, "kind": kind, "id": new_id, "file": source})
    else:
        what = {"bench_run": "run", "plan_validation": "plan validation", "loadtest": "load test",
                "acceptance": "acceptance"}[kind]  # fmt: skip
        render.console.print(f"imported {source} into {path} as {what} {new_id}", soft_wrap=True)
    return 0


def register(app: typer.Typer) -> None:
    """Add `gpukit history` with `list`, `show`, `compare` and `import`."""
    group = typer.Typer(help="The results history of gpukit bench: list runs, show one, compare two, import one.")

    @group.callback(invoke_without_command=True)
    def history(
        ctx: typer.Context,
        db: str = db_option(),
        limit: int = typer.Option(50, "--limit", min=1, help="How many runs to list."),
        as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
    ) -> int | None:
        """List past runs (newest first)."""
        if ctx.invoked_subcommand is None:
            return _list(db, limit, as_json)
        return None

    group.command("list")(list_runs)
    group.command("show")(show)
    group.command("import")(import_run)
    group.command("compare")(compare)
    app.add_typer(group, name="history")
