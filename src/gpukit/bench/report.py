"""`gpukit report`: one run from the history as a self-contained HTML page (plots embedded as base64 PNGs) or as
Markdown (plots as PNG files beside it).

Sections, in order: the machine, the ceilings measured in the run, the seed articles' claims beside what was
measured, the CPU/GPU crossover per workload (table and speedup plots), the roofline, throughput bars per workload,
and every row (skipped and failed ones with their reason).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpukit.bench.report_claims import Claim, seed_claims
from gpukit.bench.report_labels import ceiling_rows, machine_rows
from gpukit.bench.results import THROUGHPUT_UNITS, Result, Run
from gpukit.bench.sweep import Crossover, crossovers, size_axis

__all__ = ["SECTIONS", "Plot", "Report", "build_report", "gemm_rows", "to_html", "to_markdown"]

# id → title; the HTML has one <section id=…> per entry, the Markdown one "## title" each.
SECTIONS: dict[str, str] = {
    "machine": "Machine",
    "ceilings": "Ceilings measured in this run",
    "seed-claims": "The seed articles' claims, measured here",
    "gemm": "GEMM: tensor cores against the datasheet peak and the measured rate",
    "crossover": "CPU/GPU crossover",
    "roofline": "Roofline",
    "throughput": "Throughput by backend",
    "results": "Every result",
}


NO_CROSSOVER = "no workload has both a CPU and a GPU result at a size in this run"


@dataclass(frozen=True)
class Plot:
    name: str  # file stem, unique in the report
    section: str
    title: str
    png: bytes
    caption: str = ""  # what the axes and lines are, in words and units


@dataclass
class Report:
    run: Run
    crossovers: list[Crossover]
    claims: list[Claim]
    plots: list[Plot] = field(default_factory=list)

    @property
    def workloads(self) -> list[str]:
        return sorted({r.workload for r in self.run.results})


def _spec_tflops(run: Run, dtype: str) -> float | None:
    """The GPU's datasheet dense peak for ``dtype`` (TFLOP/s), or None (unknown GPU or dtype)."""
    from gpukit.hardware.specs import match_spec

    name = run.ceilings.gpu_name or ""
    spec = match_spec(name) if name else None
    return spec.peak_tflops(dtype) if spec else None


def _spec_peak_flops(run: Run) -> float | None:
    peak = _spec_tflops(run, "bf16")
    return peak * 1e12 if peak else None


_GEMM_COLUMNS = (
    "backend",
    "dtype",
    "n",
    "TFLOP/s",
    "% of datasheet peak",
    "% of best cuBLAS (same dtype)",
    "vs cuBLAS at same n",
)


def gemm_rows(run: Run) -> tuple[list[list[str]], list[str]]:
    """Per (backend, dtype) its largest-n gemm row against the datasheet peak and the measured cuBLAS rate; and
    one sentence per dtype comparing Triton with cuBLAS at the largest n both measured."""
    # Figures as analyse stored them on the rows (size_x, size_group, pct_of_ceiling against the run's cuBLAS rate):
    # the report recomputes none of them, so it shows what `gpukit bench gemm` and `--sweep` printed.
    ok = [r for r in run.results if r.workload == "gemm" and r.ok and r.tflops]
    by_key: dict[tuple[str, str], Result] = {}
    at: dict[tuple[str, str, float], float] = {}
    for r in ok:
        n, dt = r.size_x or 0.0, r.size_group or str(r.dtype)
        at[(r.backend, dt, n)] = r.tflops or 0.0
        old = by_key.get((r.backend, dt))
        if old is None or n > (old.size_x or 0.0):
            by_key[(r.backend, dt)] = r
    rows = []
    for (backend, dt), r in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        n = r.size_x or 0.0
        peak = (run.ceilings.spec_tflops.get(dt) or _spec_tflops(run, dt)) if r.device != "cpu" else None
        cub = at.get(("cublas", dt, n))
        rows.append(
            [
                backend,
                dt,
                f"{n:.0f}",
                f"{r.tflops:,.1f}",
                _pct(r.tflops, peak),
                f"{r.pct_of_ceiling:.1f}%" if r.device != "cpu" and r.pct_of_ceiling is not None else "n/a",
                _pct(r.tflops, cub) if r.device != "cpu" else "n/a",
            ]
        )
    notes = []
    for variant in ("triton", "triton-ptr"):
        for dt in ("bf16", "fp16"):
            common = [n for (b, d, n) in at if b == variant and d == dt and ("cublas", dt, n) in at]
            if common:
                n = max(common)
                ratio = at[(variant, dt, n)] / at[("cublas", dt, n)]
                notes.append(
                    f"{variant} {dt} at {n:.0f}³: {at[(variant, dt, n)]:,.1f} TFLOP/s = "
                    f"{100 * ratio:.1f}% of cuBLAS {dt} ({at[('cublas', dt, n)]:,.1f} TFLOP/s), same run"
                )
    return rows, notes


def _pct(value: float | None, of: float | None) -> str:
    return f"{100.0 * value / of:.1f}%" if value and of else "n/a"


def build_report(run: Run) -> Report:
    """Everything the report shows, computed from one run's rows, ceilings and machine info; plots rendered."""
    from gpukit.bench import report_plots as rp

    found = crossovers(run.results)
    report = Report(run=run, crossovers=found, claims=seed_claims(run, found))
    for w in report.workloads:
        mine = [c for c in found if c.workload == w and c.points]
        if mine:
            report.plots.append(
                Plot(f"speedup-{w}", "crossover", f"{w}: speedup vs {size_axis(w)}", rp.speedup_plot(w, mine))
            )
    fig, caption = rp.roofline_figure(run, _spec_peak_flops(run))
    png = rp._png(fig)
    report.plots.append(Plot("roofline", "roofline", "Roofline", png, caption))
    for w in report.workloads:
        if any(r.workload == w and r.ok for r in run.results):
            png = rp.bars_plot(w, run.results)
            caption = f"{w}: throughput by backend on a logarithmic axis (every bar chart uses one)"
            report.plots.append(Plot(f"bars-{w}", "throughput", f"{w}: throughput", png, caption))
    from gpukit.bench.report_collectives import multi_gpu_plots  # imports Plot from here: imported late

    report.plots += multi_gpu_plots(run)
    return report


# ---- table content shared by both formats -------------------------------------------------------------------


def _f(value: Any, spec: str = ".3g") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _machine_rows(run: Run) -> list[tuple[str, str]]:
    return machine_rows(run)


def _ceiling_rows(run: Run) -> list[tuple[str, str]]:
    return ceiling_rows(run)


_RESULT_COLUMNS = (
    "workload",
    "backend",
    "device",
    "size",
    "status",
    "kernel median",
    "throughput",
    "% ceiling",
    "speedup",
    "speedup e2e",
    "compile",
    "h2d",
    "d2h",
    "rel. error",
    "reason",
)


def _result_cells(r: Result) -> list[str]:
    tp = f"{r.throughput:.4g} {THROUGHPUT_UNITS[r.throughput_unit][1]}" if r.throughput and r.throughput_unit else ""
    return [
        r.workload,
        r.backend,
        r.device,
        r.size,
        r.status,
        _sec(r.kernel_median_s),
        tp,
        _f(r.pct_of_ceiling, ".1f"),
        _x(r.speedup),
        _x(r.speedup_e2e),
        _sec(r.compile_s),
        _sec(r.h2d_s),
        _sec(r.d2h_s),
        _f(r.error, ".2e"),
        r.reason or "",
    ]


def _sec(s: float | None) -> str:
    if s is None:
        return ""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(s) >= scale or unit == "ns":
            return f"{s / scale:.3g} {unit}"
    return ""  # pragma: no cover


def _x(v: float | None) -> str:
    return f"{v:.3g}×" if v is not None else ""


_CROSS_COLUMNS = ("workload", "dtype", "mode", "GPU faster from", "estimate", "last size not won", "axis")


def _cross_cells(c: Crossover) -> list[str]:
    status = {
        "crosses": c.size_label,
        "gpu_always": f"{c.size_label} (every size measured)",
        "never": "not within the sizes measured",
        "insufficient": "too few sizes",
    }[c.status]
    est = f"≈ {c.x_estimate:,.0f}" if c.x_estimate else ""
    mode = "kernel only" if c.mode == "kernel" else "end to end (with transfers)"
    return [c.workload, c.group or "-", mode, status or "", est, c.below_label or "", size_axis(c.workload)]


# ---- HTML ---------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#222;padding:0 1rem}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .45rem;text-align:left;vertical-align:top}
th{background:#f2f2f2} tr.failed td{background:#fde8e8} tr.skipped td{color:#777}
img{max-width:100%;height:auto;display:block;margin:.5rem 0 .3rem} .nm{color:#a33;font-style:italic}
figcaption{font-size:.8rem;color:#555;margin-bottom:1.5rem}
"""


def _table(
    columns: tuple[str, ...] | list[str], rows: list[list[str]], row_class: Callable[[int], str] | None = None
) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{row_class(i)}"' if row_class else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _img(p: Plot) -> str:
    data = base64.b64encode(p.png).decode("ascii")
    caption = f"<figcaption>{html.escape(p.caption)}</figcaption>" if p.caption else ""
    return (
        f'<figure id="plot-{p.name}"><img alt="{html.escape(p.title)}" src="data:image/png;base64,{data}">'
        f"{caption}</figure>"
    )


def _claims_html(claims: list[Claim]) -> str:
    rows = []
    for c in claims:
        measured = html.escape(c.text) if c.measured else f'<span class="nm">{html.escape(c.text)}</span>'
        rows.append(f"<tr><td>{html.escape(c.title)}</td><td>{html.escape(c.seed)}</td><td>{measured}</td></tr>")
    head = "<tr><th>claim</th><th>the seed says</th><th>measured here</th></tr>"
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _gemm_html(run: Run) -> str:
    rows, notes = gemm_rows(run)
    if not rows:
        return '<p class="nm">no gemm rows in this run</p>'
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return (f"<ul>{items}</ul>" if items else "") + _table(_GEMM_COLUMNS, rows)


def to_html(report: Report) -> str:
    """The report as one self-contained HTML document (no external resources)."""
    run = report.run
    body: dict[str, str] = {
        "machine": _table(("what", "value"), [list(r) for r in _machine_rows(run)]),
        "ceilings": "<p>Measured in the same run as the results (bandwidths count bytes read plus written); the "
        "rows that say <em>datasheet</em> are the vendor's figures, shown beside them.</p>"
        + _table(("ceiling", "value"), [list(r) for r in _ceiling_rows(run)]),
        "seed-claims": _claims_html(report.claims),
        "gemm": _gemm_html(run),
        "crossover": "<p>Smallest size from which the GPU is faster and stays faster; a difference inside the "
        "samples' spread is a tie. The estimate interpolates where the speedup passes 1 on log axes.</p>"
        + (
            _table(_CROSS_COLUMNS, [_cross_cells(c) for c in report.crossovers])
            if report.crossovers
            else f'<p class="nm">{NO_CROSSOVER}</p>'
        ),
        "roofline": "",
        "throughput": "",
        "results": _table(_RESULT_COLUMNS, [_result_cells(r) for r in run.results], lambda i: run.results[i].status),
    }
    for p in report.plots:
        body[p.section] += _img(p)
    sections = "".join(
        f'<section id="{sid}"><h2>{html.escape(title)}</h2>{body[sid]}</section>' for sid, title in SECTIONS.items()
    )
    title = f"gpukit report — run {run.id if run.id is not None else ''} {run.started_at}".strip()
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{sections}</body></html>\n"
    )


# ---- Markdown -----------------------------------------------------------------------------------------------


def _md_table(columns: tuple[str, ...] | list[str], rows: list[list[str]]) -> str:
    def cell(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _gemm_md(run: Run) -> str:
    rows, notes = gemm_rows(run)
    if not rows:
        return "_no gemm rows in this run_"
    return "".join(f"- {n}\n" for n in notes) + "\n" + _md_table(_GEMM_COLUMNS, rows)


def to_markdown(report: Report, plot_dir: str) -> str:
    """The report as Markdown; plot ``p`` is referenced as ``{plot_dir}/{p.name}.png`` (the caller writes them)."""
    run = report.run
    body: dict[str, str] = {
        "machine": _md_table(("what", "value"), [list(r) for r in _machine_rows(run)]),
        "ceilings": _md_table(("ceiling", "value"), [list(r) for r in _ceiling_rows(run)]),
        "seed-claims": _md_table(
            ("claim", "the seed says", "measured here"), [[c.title, c.seed, c.text] for c in report.claims]
        ),
        "gemm": _gemm_md(run),
        "crossover": _md_table(_CROSS_COLUMNS, [_cross_cells(c) for c in report.crossovers])
        if report.crossovers
        else f"_{NO_CROSSOVER}_",
        "roofline": "",
        "throughput": "",
        "results": _md_table(_RESULT_COLUMNS, [_result_cells(r) for r in run.results]),
    }
    for p in report.plots:
        body[p.section] += f"\n\n![{p.title}]({plot_dir}/{p.name}.png)" + (f"\n\n_{p.caption}_" if p.caption else "")
    title = f"# gpukit report — run {run.id if run.id is not None else ''} {run.started_at}".strip()
    parts = [title] + [f"## {t}\n\n{body[sid].strip()}" for sid, t in SECTIONS.items()]
    return "\n\n".join(parts) + "\n"
