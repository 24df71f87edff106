"""`gpukit accept`: accept this node — every GPU measured, soaked, watched and judged; exit 1 on a slow or faulty
GPU, 2 on bad input (no GPU without --device cpu, a store that cannot be used, a textfile folder that is missing)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpukit.cli import render
from gpukit.cli.history import node_option

if TYPE_CHECKING:
    from gpukit.fleet.record import Acceptance, Figure, GpuAcceptance
    from gpukit.history import History

DB_HELP = "History to save to and, given here or in $GPUKIT_DB, the fleet to judge against: a SQLite file or a "
DB_HELP += "postgresql:// URL (default: the local SQLite history)."
PROM_HELP = "Write gpukit_accept.prom into this folder (node_exporter's textfile collector)."
_MARK = {"ok": "[green]ok[/]", "slow": "[yellow]slow[/]", "faulty": "[bold red]faulty[/]"}


def _progress() -> Any:
    t0 = time.perf_counter()

    def say(text: str) -> None:
        sys.stderr.write(f"accept {time.perf_counter() - t0:6.1f}s {text}\n")
        sys.stderr.flush()

    return say


def _save(history: History, doc: dict[str, Any]) -> int | None:
    """Save the acceptance; when the store refuses it, keep it as JSON beside the history and say how to import it."""
    from gpukit.history import save_or_keep

    saved, kept, exc = save_or_keep(history, "acceptance", doc)
    if exc is not None:
        render.error(f"{exc.message}; the acceptance was written to {kept}", hint=f"gpukit history import {kept}")
    return saved


def _num(value: float | None) -> str:
    """Four significant digits, thousands grouped: 781.2, 4,175, 0.005594."""
    if value is None:
        return render.NA
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.4g}"


def _ratio(value: float | None) -> str:
    return render.fmt(None if value is None else 100.0 * value, ".1f", "%").replace(" %", "%")


def _short(name: str) -> str:
    return name.removesuffix("_tflops").removesuffix("_gbps")


def _figure_row(name: str, f: Figure) -> list[str]:
    if f.status != "ok":
        return [_short(name), f"[red]{f.status}[/]", "", "", "", "", ""]
    gate = _num(f.dcgm_gate) if f.dcgm_gate is not None else "—"
    flags = ", ".join(flag.removeprefix("slow_vs_") for flag in f.flags) if f.flags else "[green]ok[/]"
    return [_short(name), f"{_num(f.value)} {f.unit}", _ratio(f.vs_reference), _ratio(f.vs_node),
            _ratio(f.vs_fleet), gate, flags]  # fmt: skip


def _print_gpu(g: GpuAcceptance) -> None:
    columns = ["figure", "value", "÷ ref", "÷ node", "÷ fleet", "DCGM L3", "slow vs"]
    rows = [_figure_row(n, f) for n, f in g.figures.items()]
    title = f"GPU {g.index} {g.model} {g.uuid or ''} — {_MARK.get(g.verdict, g.verdict)}"
    render.console.print(render.table(columns, rows, title=title, justify=["left"] + ["right"] * 5 + ["left"]))
    notes: dict[str, list[str]] = {}
    for n, f in g.figures.items():
        if f.dcgm_note:
            notes.setdefault(f.dcgm_note, []).append(_short(n))
    for note, names in notes.items():
        render.console.print(f"[dim]  DCGM L3 beside {', '.join(names)}: {render.escape(note)}[/]")
    for n, f in g.figures.items():
        if f.status != "ok":
            render.console.print(f"  [red]{n} {f.status}:[/] {render.escape(f.reason or '')}")
    s = g.soak
    if s is not None and s.trace:
        rates = sorted(p.tflops for p in s.trace)
        render.console.print(
            f"  soak {s.duration_s:.0f} s: {_num(rates[0])} … {_num(rates[-1])} TFLOP/s per second, sag "
            f"{render.fmt(None if s.sag is None else 100 * s.sag, '.1f', '%')} (flagged above 3 %)"
        )
    for reason in g.reasons:
        render.console.print(f"  [yellow]•[/] {render.escape(reason)}")


def _print(acc: Acceptance, saved: int | None, textfile: Path | None) -> None:
    ref = acc.reference
    where = f"reference: {ref['model']} from {ref['source']} ({ref['date']})" if ref else "no shipped reference"
    render.console.print(f"[bold]gpukit accept[/] node {acc.node.get('name')} · {acc.device} · {where}")
    for g in acc.gpus:
        _print_gpu(g)
    for name, check in (acc.node_checks or {}).items():
        if isinstance(check, dict):
            keys = ("ranks", "busbw_gbps", "algbw_gbps")
            numbers = ", ".join(f"{k} {_num(check[k])}" for k in keys if check.get(k) is not None)
            detail = check.get("reason") or numbers
            render.console.print(f"  {name}: {check.get('status')} {render.escape(str(detail or ''))}")
    render.console.print(f"node verdict: {_MARK.get(acc.verdict, acc.verdict)} in {acc.duration_s:.0f} s")
    for reason in acc.reasons:
        render.console.print(f"  • {render.escape(reason)}")
    if saved is not None:
        render.console.print(f"[dim]saved as acceptance {saved}[/]")
    if textfile is not None:
        render.console.print(f"[dim]metrics written to {textfile}[/]")


def accept(
    soak_s: float = typer.Option(30.0, "--soak-s", help="Seconds of sustained GEMM (3–3600)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    node: str = node_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the acceptance document as JSON (docs/fleet.md)."),
    prom_textfile: Path = typer.Option(None, "--prom-textfile", help=PROM_HELP),
    device: str = typer.Option("cuda", "--device", help="cuda (every GPU), or cpu: every part but the GPU figures."),
    no_save: bool = typer.Option(False, "--no-save", help="Do not record this acceptance in the history."),
    no_node_checks: bool = typer.Option(False, "--no-node-checks", help="Leave out the p2p matrix and all-reduce."),
) -> int:
    """Accept this node: GEMM, HBM and PCIe figures per GPU, NVML health, a soak, p2p and all-reduce; each figure
    checked and judged against the model's reference, the node's GPUs and the fleet."""
    from gpukit.fleet.accept import AcceptSettings, run_accept
    from gpukit.fleet.prom import check_textfile_dir, write_textfile
    from gpukit.hardware.identity import node_name

    settings = AcceptSettings(soak_s=soak_s, device=device, node=node, node_checks=not no_node_checks)
    if prom_textfile is not None:
        check_textfile_dir(prom_textfile)
    history = None if no_save and db is None else _open(db, node)
    try:
        fleet = history.latest_acceptances() if history is not None and (db or os.environ.get("GPUKIT_DB")) else None
        previous = history.previous_identity(node_name(node)) if history is not None else None
        acc = run_accept(settings, fleet_records=fleet, previous=previous, progress=_progress())
        doc = acc.to_dict()
        saved = _save(history, doc) if history is not None and not no_save else None
    finally:
        if history is not None:
            history.close()
    textfile = write_textfile(prom_textfile, [doc]) if prom_textfile is not None else None
    if as_json:
        render.print_json({**doc, "id": saved})
    else:
        _print(acc, saved, textfile)
    return 0 if acc.verdict == "ok" else 1


def _open(db: str | None, node: str | None) -> History:
    from gpukit.history import open_history

    return open_history(db, node=node)


def deploy_accept(image: str, out: Path, name: str, namespace: str | None, db_secret: str | None, nodes: int | None,
                  node_gpus: int, schedule: str, textfile_dir: str, as_json: bool) -> int:  # fmt: skip
    """`gpukit deploy k8s --accept`: the Job and CronJob running `gpukit accept` on every GPU node."""
    from gpukit.errors import ConfigError
    from gpukit.fleet.k8s import AcceptDeploySpec, write_accept_deploy

    if not db_secret:
        raise ConfigError("--accept needs --db-secret NAME", hint="the Secret whose key 'url' holds the store's URL")
    if nodes is None:
        raise ConfigError("--accept needs --nodes N", hint="how many GPU nodes to accept (one pod per node)")
    spec = AcceptDeploySpec(image=image, db_secret=db_secret, out=out, nodes=nodes,
                            name="gpukit-accept" if name == "gpukit-serve" else name, namespace=namespace,
                            gpus_per_node=node_gpus, schedule=schedule, textfile_dir=textfile_dir)  # fmt: skip
    result = write_accept_deploy(spec)
    if as_json:
        render.print_json(result)
        return 0
    render.console.print(f"wrote {', '.join(result['files'])} to {result['out']}")
    ns = f" -n {namespace}" if namespace else ""
    render.console.print(f"next: kubectl{ns} create secret generic {db_secret} --from-literal=url=postgresql://… && "
                         f"kubectl{ns} apply -f {out}")  # fmt: skip
    return 0


def register(app: typer.Typer) -> None:
    app.command("accept")(accept)
