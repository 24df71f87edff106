"""`gpukit fleet status | outliers | compare A B | report | exporter`: the fleet's acceptances in one store, every GPU
judged against its node, its fleet and its reference (the one slow rule in ``gpukit.fleet.stats``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from gpukit.cli import render
from gpukit.cli.history import db_option

if TYPE_CHECKING:
    from gpukit.fleet.compare import NodeComparison
    from gpukit.fleet.outliers import Outlier
    from gpukit.fleet.status import Cell, FleetStatus

SPREADS_HELP = (
    "JSON file of each figure's run-to-run spread (max/min − 1 over ten runs on one GPU). Default: the spread of "
    "the reference shipped for the GPU model (what `gpukit accept` uses), else the fleet's own MAD."
)


def _load(db: str | None, spreads: Path | None) -> FleetStatus:
    from gpukit.fleet.status import fleet_status, load_latest, load_sigmas, require_fleet

    records, where = load_latest(db)
    require_fleet(records, where)
    return fleet_status(records, sigmas=load_sigmas(spreads) if spreads else None)


_RED = "bold red"


def _status_cell(c: Cell | None) -> tuple[str, str | None]:
    """(text, style) of one figure of one GPU: % of the fleet median, * when flagged."""
    if c is None:
        return "—", None
    if c.status == "failed":
        return "failed", _RED
    if c.status != "ok":
        return c.status, "dim"
    if c.vs_fleet is None:
        return render.NA + ("*" if c.flags else ""), _RED if c.flags else None
    text = f"{100 * c.vs_fleet:.1f}"
    return (text + "*", _RED) if c.flags else (text + " ", None)


def _grid(columns: list[str], rows: list[list[tuple[str, str | None]]]) -> str:
    """A plain aligned grid as rich markup (first column left, the rest right). The status table has a row per
    GPU: rich's Table lays out 512 rows × 10 cells in ~1 s, this in a few ms (`fleet status` must answer in 2 s)."""
    widths = [max(len(columns[i]), *(len(r[i][0]) for r in rows)) for i in range(len(columns))]

    def line(cells: list[tuple[str, str | None]]) -> str:
        out = []
        for i, (text, style) in enumerate(cells):
            padded = escape(text.ljust(widths[i]) if i == 0 else text.rjust(widths[i]))
            out.append(f"[{style}]{padded}[/]" if style else padded)
        return "  ".join(out)

    header = line([(c, "bold") for c in columns])
    rule = "  ".join("─" * w for w in widths)
    return "\n".join([header, rule, *(line(r) for r in rows)])


def _print_status(st: FleetStatus) -> None:
    from gpukit.fleet.status import short_name

    rows = []
    for r in st.rows:
        verdict = (r.verdict, None if r.verdict == "ok" else _RED)
        rows.append([(r.node, None), (str(r.gpu), None), *(_status_cell(r.cells.get(f)) for f in st.figures), verdict])
    render.console.print(
        f"[bold]Fleet: {len(st.nodes)} nodes, {len(st.rows)} GPUs[/] — each figure in % of the fleet median "
        "(* flagged: slow against the node, the fleet or the reference)",
        soft_wrap=True,
    )
    columns = ["node", "GPU", *(short_name(f) for f in st.figures), "verdict"]
    render.console.print(_grid(columns, rows), soft_wrap=True)
    _print_groups(st)
    for reason in st.reasons:
        render.console.print(f"[yellow]note:[/] {escape(reason)}", soft_wrap=True)
    n = len(st.flagged)
    render.console.print(f"{n} GPU(s) flagged · gpukit fleet outliers names them", soft_wrap=True)


def _print_groups(st: FleetStatus) -> None:
    from gpukit.fleet.stats import noise_line

    rows = []
    for g in st.groups:
        line = noise_line(st.thresholds.slow_vs_fleet, g.sigma, st.thresholds)[0]
        rows.append(
            [
                escape(g.model.removeprefix("NVIDIA ")),
                g.figure,
                render.fmt(g.median, ",.4g", g.unit),
                render.fmt(100 * g.mad / g.median if g.mad is not None and g.median else None, ".2f", "%"),
                f"{g.n_values} on {g.n_nodes} nodes",
                render.fmt(100 * g.sigma if g.sigma is not None else None, ".2f", "%") + f" ({g.sigma_source})",
                f"{line:.1%} below",
            ]
        )
    columns = ["model", "figure", "fleet median", "MAD", "values", "noise σ", "slow from (fleet)"]
    _print_wide(render.table(columns, rows, title="Fleet medians (per GPU model and software stack)"))


def _print_wide(table: Any) -> None:
    # A fleet table is wide by nature (a column per figure): written to a file or a pipe, give it the width it
    # needs instead of folding every cell at 80 columns; on a terminal, the terminal's width.
    if render.console.is_terminal:
        render.console.print(table)
    else:
        from rich.console import Console

        Console(width=200, highlight=False, soft_wrap=False).print(table)


def status(
    db: str = db_option(),
    spreads: Path = typer.Option(None, "--spreads", help=SPREADS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the fleet's status as JSON."),
) -> int:
    """Every GPU of the fleet × each acceptance figure, as % of the fleet median, flagged cells marked."""
    st = _load(db, spreads)
    if as_json:
        render.print_json(st.to_dict())
    else:
        _print_status(st)
    return 0


def _outlier_row(o: Outlier) -> list[str]:
    from gpukit.fleet.outliers import describe_telemetry

    value = render.fmt(o.value, ",.4g", o.unit) if o.value is not None else f"failed: {o.reason or ''}".strip()
    return [
        escape(o.node),
        str(o.gpu),
        o.figure,
        escape(value),
        render.fmt(100 * o.vs_fleet if o.vs_fleet is not None else None, ".1f", "%"),
        render.fmt(o.fleet_mads, "+.1f"),
        render.fmt(100 * o.vs_node if o.vs_node is not None else None, ".1f", "%"),
        ", ".join(o.flags),
        escape(describe_telemetry(o.telemetry)),
    ]


def outliers(
    db: str = db_option(),
    spreads: Path = typer.Option(None, "--spreads", help=SPREADS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the outliers as JSON."),
) -> int:
    """Name every flagged GPU with the figure, its distance from the fleet median in MADs and the telemetry seen.
    Exit 1 when any GPU is flagged."""
    from gpukit.fleet.outliers import find_outliers

    st = _load(db, spreads)
    found = find_outliers(st)
    gpus = len({(o.node, o.gpu) for o in found})
    if as_json:
        render.print_json({"nodes": len(st.nodes), "gpus": len(st.rows), "flagged_gpus": gpus, "outliers": found})
    elif not found:
        render.console.print(f"no outliers: {len(st.rows)} GPUs on {len(st.nodes)} nodes, none flagged")
    else:
        columns = ["node", "GPU", "figure", "value", "of fleet median", "MADs", "of node median", "flags", "seen"]
        title = f"{gpus} of {len(st.rows)} GPUs flagged (worst first; MADs: raw, signed, from the fleet median)"
        _print_wide(render.table(columns, [_outlier_row(o) for o in found], title=title))
    return 1 if found else 0


def _print_comparison(c: NodeComparison) -> None:
    if c.differences:
        rows = [[d.what, escape(str(d.a)), escape(str(d.b))] for d in c.differences]
        render.console.print(
            render.table(["≠ setting", escape(c.a), escape(c.b)], rows, title="Taken under different settings")
        )
    rows = []
    for f in c.figures:
        rows.append(
            [
                f.figure,
                render.fmt(f.a_median, ",.4g", f.unit),
                render.fmt(f.b_median, ",.4g", f.unit),
                render.fmt(f.ratio, ".3f", "×"),
                render.fmt(100 * f.noise_band if f.noise_band is not None else None, ".1f", "%"),
                f.verdict + (" ≠" if c.differences else ""),
            ]
        )
    title = f"{c.b} against {c.a} (median over each node's GPUs; a change inside the noise band is noise)"
    columns = ["figure", f"A {escape(c.a)}", f"B {escape(c.b)}", "B/A", "noise ±", "verdict"]
    _print_wide(render.table(columns, rows, title=escape(title)))
    if c.differences:
        render.console.print("[yellow]≠ the two nodes ran under different settings: the ratios compare those too[/]")


def compare(
    node_a: str = typer.Argument(..., help="Node A (the reference)."),
    node_b: str = typer.Argument(..., help="Node B (compared against A)."),
    db: str = db_option(),
    spreads: Path = typer.Option(None, "--spreads", help=SPREADS_HELP),
    force: bool = typer.Option(False, "--force", help="Compare even when the settings differ (marked ≠)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> int:
    """Compare two nodes' newest acceptances figure by figure; refuse (unless --force) pairs taken under a different
    driver, CUDA, software stack, power limit or clock setting."""
    from gpukit.errors import ConfigError
    from gpukit.fleet.compare import compare_nodes
    from gpukit.fleet.status import load_latest, load_sigmas

    records, where = load_latest(db)
    if not records:
        raise ConfigError(f"no acceptance runs in {where}", hint="run `gpukit accept --db URL` on each node first")
    c = compare_nodes(records, node_a, node_b, sigmas=load_sigmas(spreads) if spreads else None)
    if c.differences and not force:
        diffs = "; ".join(f"{d.what} {d.a} vs {d.b}" for d in c.differences[:4])
        more = f" (+{len(c.differences) - 4} more)" if len(c.differences) > 4 else ""
        raise ConfigError(
            f"{node_a} and {node_b} were accepted under different settings: {diffs}{more}",
            hint="compare nodes with the same driver, clocks and power limit, or pass --force to compare anyway "
            "(the differences are marked)",
        )
    if as_json:
        render.print_json(c.to_dict())
    else:
        _print_comparison(c)
    return 0


def report(
    output: Path = typer.Option(Path("fleet.html"), "--output", "-o", help="The HTML file to write."),
    db: str = db_option(),
    spreads: Path = typer.Option(None, "--spreads", help=SPREADS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> int:
    """Write the fleet as one self-contained HTML page: a heatmap of nodes × figures, each figure's distribution,
    the soak traces of flagged GPUs, the outliers and the whole status table."""
    from gpukit.cli.bench_render import write_output
    from gpukit.fleet.report import build_fleet_report, to_html

    st = _load(db, spreads)
    built = build_fleet_report(st)
    write_output(output, to_html(built))
    if as_json:
        render.print_json({"file": str(output), "plots": [p.name for p in built.plots], "flagged": len(st.flagged)})
    else:
        render.console.print(
            f"wrote {output} ({len(st.nodes)} nodes, {len(st.rows)} GPUs, {len(st.flagged)} flagged)", soft_wrap=True
        )
    return 0


def exporter(
    db: str = db_option(),
    port: int = typer.Option(9835, "--port", min=1, max=65535, help="TCP port to serve /metrics on."),
    host: str = typer.Option("0.0.0.0", "--host", help="Address to listen on."),
    spreads: Path = typer.Option(None, "--spreads", help=SPREADS_HELP),
) -> int:
    """Serve the fleet's status on /metrics for Prometheus (read from the store at each scrape). Telemetry over
    time is dcgm-exporter's job: this exports the acceptance figures and verdicts only."""
    from gpukit.fleet.exporter import serve
    from gpukit.fleet.status import load_latest, load_sigmas

    load_latest(db)  # a bad --db fails now, with its hint, not at the first scrape
    render.err_console.print(f"serving the fleet's status on http://{host}:{port}/metrics (Ctrl-C stops)")
    serve(db, host, port, sigmas=load_sigmas(spreads) if spreads else None)
    return 0


def register(app: typer.Typer) -> None:
    """Add `gpukit fleet` with `status`, `outliers`, `compare`, `report` and `exporter`."""
    group = typer.Typer(
        help="The fleet in one store: every GPU judged against its node, its fleet and its reference.",
        no_args_is_help=True,
    )
    group.command("status")(status)
    group.command("outliers")(outliers)
    group.command("compare")(compare)
    group.command("report")(report)
    group.command("exporter")(exporter)
    app.add_typer(group, name="fleet")
