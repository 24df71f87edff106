"""`gpukit fleet report`: the fleet as one self-contained HTML page, built like `gpukit report` (its plot helpers,
tables and page style are reused from ``gpukit.bench.report`` / ``report_plots``, not copied).

Sections, in order: the summary, a heatmap of nodes × figures (each node's slowest GPU as % of the fleet median),
the outliers, the distribution of each figure over the fleet with its median and slow line, the soak traces of the
flagged GPUs, the fleet medians, and every GPU's row.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from gpukit.bench.report import _CSS, Plot, _img, _table
from gpukit.bench.report_plots import _figure, _png
from gpukit.fleet.outliers import Outlier, find_outliers
from gpukit.fleet.stats import noise_line
from gpukit.fleet.status import Cell, FleetStatus, GpuRow, short_name

__all__ = ["HEATMAP_MAX_NODES", "SECTIONS", "FleetReport", "build_fleet_report", "to_html"]

SECTIONS: dict[str, str] = {
    "summary": "Summary",
    "heatmap": "Nodes × figures",
    "outliers": "Outliers",
    "distributions": "Each figure over the fleet",
    "soak": "Soak traces of the flagged GPUs",
    "medians": "Fleet medians",
    "gpus": "Every GPU",
}
HEATMAP_MAX_NODES = 96  # more nodes than this: the heatmap shows the slowest ones (and says so)
SOAK_MAX_GPUS = 12  # traces drawn in one soak plot


@dataclass
class FleetReport:
    status: FleetStatus
    outliers: list[Outlier]
    plots: list[Plot] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)  # section → a sentence about what is left out


def _perf(cell: Cell | None) -> float | None:
    """The cell as % of the fleet median in the "higher is better" sense (a time 5 % longer reads 95.2)."""
    if cell is None or cell.vs_fleet is None or cell.vs_fleet <= 0:
        return None
    return 100 * (cell.vs_fleet if cell.higher_is_better else 1 / cell.vs_fleet)


def _node_cells(st: FleetStatus) -> dict[str, dict[str, tuple[float | None, bool]]]:
    """Per node and figure: its slowest GPU's % of the fleet median, and whether any GPU there is flagged."""
    out: dict[str, dict[str, tuple[float | None, bool]]] = {}
    for row in st.rows:
        mine = out.setdefault(row.node, {})
        for name in st.figures:
            cell = row.cells.get(name)
            p, flagged = _perf(cell), bool(cell and cell.flags)
            old_p, old_f = mine.get(name, (None, False))
            worst = p if old_p is None else (old_p if p is None else min(p, old_p))
            mine[name] = (worst, old_f or flagged)
    return out


def heatmap_plot(st: FleetStatus) -> tuple[bytes, str]:
    """Nodes (rows) × figures (columns), colour = the node's slowest GPU in % of the fleet median (90–110 %,
    red slow, blue fast), × on a cell with a flagged GPU; and its caption."""
    import numpy as np

    cells = _node_cells(st)
    order = sorted(cells, key=lambda n: min((p for p, _ in cells[n].values() if p is not None), default=100.0))
    shown = sorted(order[:HEATMAP_MAX_NODES])
    grid = np.array([[cells[n][f][0] if cells[n][f][0] is not None else np.nan for f in st.figures] for n in shown])
    fig = _figure(1.6 + 0.9 * len(st.figures), 1.4 + 0.16 * len(shown))
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="RdBu", vmin=90, vmax=110, aspect="auto", interpolation="nearest")
    for i, n in enumerate(shown):
        for j, f in enumerate(st.figures):
            if cells[n][f][1]:
                ax.text(j, i, "×", ha="center", va="center", fontsize=8, color="black")
    ax.set_xticks(range(len(st.figures)), [short_name(f) for f in st.figures], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(shown)), shown, fontsize=max(4, min(8, 700 // max(len(shown), 1))))
    fig.colorbar(image, ax=ax, label="% of fleet median")
    ax.set_title("Each node's slowest GPU per figure (× a flagged GPU)", fontsize=10)
    left_out = len(order) - len(shown)
    caption = (
        f"{len(shown)} nodes × {len(st.figures)} figures; colour from 90 % (red, slower) to 110 % (blue) of the fleet "
        "median for the GPU model and stack; grey: no fleet figure"
        + (f"; the {left_out} nodes with no GPU below the others are left out" if left_out else "")
    )
    return _png(fig), caption


def distribution_plot(st: FleetStatus, figure: str) -> tuple[bytes, str]:
    """One figure's values over the fleet (histogram per model and stack), the median and the slow line marked,
    flagged GPUs' values as red ticks under the axis."""
    fig = _figure(7.0, 3.2)
    ax = fig.add_subplot()
    captions = []
    for k, g in enumerate(x for x in st.groups if x.figure == figure):
        rows = [r for r in st.rows if r.model == g.model and r.stack_key == g.stack_key and figure in r.cells]
        values = [v for r in rows if (v := r.cells[figure].value) is not None]
        if not values:
            continue
        color = f"C{k}"
        ax.hist(values, bins=min(40, max(8, len(values) // 6)), color=color, alpha=0.6, label=g.model)
        flagged = [v for r in rows if r.cells[figure].flags and (v := r.cells[figure].value) is not None]
        ax.plot(flagged, [0] * len(flagged), "|", color="red", markersize=14, markeredgewidth=2)
        if g.median is not None:
            line = noise_line(st.thresholds.slow_vs_fleet, g.sigma, st.thresholds)[0]
            at = g.median * (1 - line) if g.higher_is_better else g.median / (1 - line)
            ax.axvline(g.median, color=color, linewidth=1.4)
            ax.axvline(at, color="red", linestyle="--", linewidth=1.0)
            captions.append(f"{g.model}: median {g.median:,.4g} {g.unit}, slow from {at:,.4g} {g.unit} (dashed)")
    unit = next((g.unit for g in st.groups if g.figure == figure), "")
    ax.set_xlabel(f"{figure} ({unit})")
    ax.set_ylabel("GPUs")
    ax.set_title(f"{figure} over the fleet (red ticks: flagged GPUs)", fontsize=10)
    ax.grid(True, alpha=0.3)
    return _png(fig), "; ".join(captions) or "no fleet median for this figure"


def soak_plot(rows: list[GpuRow]) -> tuple[bytes, str]:
    """The per-second soak throughput of flagged GPUs (at most SOAK_MAX_GPUS), one line each; × on the seconds in
    which NVML reported a throttle reason."""
    fig = _figure(7.5, 3.8)
    ax = fig.add_subplot()
    drawn = [r for r in rows if r.soak and r.soak.trace][:SOAK_MAX_GPUS]
    throttled: set[str] = set()
    for k, r in enumerate(drawn):
        assert r.soak is not None
        trace = r.soak.trace
        ax.plot([p.t_s for p in trace], [p.tflops for p in trace], color=f"C{k}", label=f"{r.node} GPU {r.gpu}")
        hot = [p for p in trace if p.throttle_reasons]
        ax.plot([p.t_s for p in hot], [p.tflops for p in hot], "x", color=f"C{k}", markersize=5)
        throttled.update(reason for p in hot for reason in p.throttle_reasons)
    ax.set_xlabel("time into the soak (s)")
    ax.set_ylabel("GEMM TFLOP/s in that second")
    ax.set_title("Soak: sustained GEMM of the flagged GPUs", fontsize=10)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=7)
    more = len([r for r in rows if r.soak and r.soak.trace]) - len(drawn)
    caption = f"{len(drawn)} flagged GPUs' soak traces" + (f" ({more} more not drawn)" if more else "")
    if throttled:
        caption += "; × a second with a throttle reason: " + ", ".join(sorted(throttled))
    return _png(fig), caption


def build_fleet_report(st: FleetStatus) -> FleetReport:
    """Everything the page shows, plots rendered."""
    report = FleetReport(st, find_outliers(st))
    png, caption = heatmap_plot(st)
    report.plots.append(Plot("heatmap", "heatmap", "Nodes × figures", png, caption))
    for name in st.figures:
        png, caption = distribution_plot(st, name)
        report.plots.append(Plot(f"dist-{name}", "distributions", name, png, caption))
    with_soak = [r for r in st.flagged if r.soak and r.soak.trace]
    if with_soak:
        png, caption = soak_plot(with_soak)
        report.plots.append(Plot("soak", "soak", "Soak traces of flagged GPUs", png, caption))
    else:
        report.notes["soak"] = "no flagged GPU has a soak trace" if st.flagged else "no GPU is flagged"
    return report


# ---- HTML ---------------------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x is not None else "n/a"


def _summary(report: FleetReport) -> str:
    st = report.status
    t = st.thresholds
    faulty = sum(r.verdict == "faulty" for r in st.rows)
    rows = [
        ["nodes", str(len(st.nodes))],
        ["GPUs", str(len(st.rows))],
        ["GPUs flagged slow", str(len(st.flagged) - faulty)],
        ["GPUs faulty (a check failed)", str(faulty)],
        ["models and stacks", "; ".join(sorted({f"{r.model} ({r.stack_key})" for r in st.rows}))],
        ["slow rule", f"{t.slow_vs_peers:.0%} below the node's median, {t.slow_vs_fleet:.0%} below the fleet's, "
                      f"{t.slow_vs_reference:.0%} below the reference, less {t.recall_z:g} σ of noise"],
    ]  # fmt: skip
    notes = "".join(f"<li>{html.escape(r)}</li>" for r in st.reasons)
    return _table(("what", "value"), rows) + (f"<ul>{notes}</ul>" if notes else "")


def _outliers(report: FleetReport) -> str:
    from gpukit.fleet.outliers import describe_telemetry

    if not report.outliers:
        return f'<p class="nm">no GPU flagged among {len(report.status.rows)}</p>'
    rows = [
        [o.node, str(o.gpu), o.uuid or "n/a", o.figure,
         f"{o.value:,.4g} {o.unit}" if o.value is not None else f"failed: {o.reason or ''}",
         _pct(o.vs_fleet), f"{o.fleet_mads:+.1f}" if o.fleet_mads is not None else "n/a", _pct(o.vs_node),
         ", ".join(o.flags), describe_telemetry(o.telemetry)]
        for o in report.outliers
    ]  # fmt: skip
    columns = ("node", "GPU", "UUID", "figure", "value", "of fleet median", "MADs", "of node median", "flags", "seen")
    return _table(columns, rows, lambda i: "failed")


def _medians(st: FleetStatus) -> str:
    rows = []
    for g in st.groups:
        line = noise_line(st.thresholds.slow_vs_fleet, g.sigma, st.thresholds)[0]
        rows.append([
            g.model, g.stack_key, g.figure, f"{g.median:,.4g} {g.unit}" if g.median is not None else "n/a",
            f"{100 * g.mad / g.median:.2f}%" if g.mad is not None and g.median else "n/a",
            f"{g.n_values} on {g.n_nodes} nodes",
            f"{100 * g.sigma:.2f}% ({g.sigma_source})" if g.sigma is not None else "n/a", f"{line:.1%} below",
        ])  # fmt: skip
    columns = ("model", "stack", "figure", "median", "MAD", "values", "noise σ", "slow from")
    return _table(columns, rows)


def _gpus(st: FleetStatus) -> str:
    def cell(c: Cell | None) -> str:
        if c is None:
            return "—"
        if c.status != "ok":
            return c.status
        p = _perf(c)
        return (f"{p:.1f}" if p is not None else "n/a") + ("*" if c.flags else "")

    rows = [[r.node, str(r.gpu), *(cell(r.cells.get(f)) for f in st.figures), r.verdict] for r in st.rows]
    columns = ("node", "GPU", *(short_name(f) for f in st.figures), "verdict")
    intro = "<p>Each figure in % of the fleet median (higher is better); * flagged. UUIDs are in the outliers.</p>"
    return intro + _table(columns, rows, lambda i: "failed" if st.rows[i].flagged else "")


def to_html(report: FleetReport) -> str:
    """The fleet report as one self-contained HTML document (no external resources, no script)."""
    st = report.status
    body: dict[str, str] = {
        "summary": _summary(report),
        "heatmap": "",
        "outliers": _outliers(report),
        "distributions": "",
        "soak": "".join(f'<p class="nm">{html.escape(n)}</p>' for s, n in report.notes.items() if s == "soak"),
        "medians": _medians(st),
        "gpus": _gpus(st),
    }
    for p in report.plots:
        body[p.section] += _img(p)
    sections = "".join(
        f'<section id="{sid}"><h2>{html.escape(title)}</h2>{body[sid]}</section>' for sid, title in SECTIONS.items()
    )
    title = f"gpukit fleet report — {len(st.nodes)} nodes, {len(st.rows)} GPUs, {len(st.flagged)} flagged"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{sections}</body></html>\n"
    )
