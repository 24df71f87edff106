"""The report's plots as PNG bytes (matplotlib, Agg backend, no display): speedup vs size with the crossover marked,
a roofline placing every result against the ceilings measured in the run, and per-workload bars by backend."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpukit.bench.results import THROUGHPUT_UNITS, Result, Run
from gpukit.bench.sweep import Crossover, size_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "Roof",
    "bars_figure",
    "bars_plot",
    "compute_ceilings",
    "roofline_figure",
    "roofline_plot",
    "roofs",
    "speedup_plot",
]


def _figure(width: float = 7.0, height: float = 4.2) -> Figure:
    import matplotlib

    matplotlib.use("Agg", force=True)  # no display; safe in CI and on headless GPU machines
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _plain_log_ticks(axis: Any, lo: float, hi: float) -> None:
    """Ticks of a log axis as plain numbers, never its minor labels (matplotlib labels some minor ticks when an axis
    spans about a decade, and "3 × 10²" and "4 × 10²" then run into each other): 1-2-5 steps over a short axis,
    decades over a long one, the rest unlabelled."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 0.0
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.10g}"))
    axis.set_minor_formatter(NullFormatter())


def speedup_plot(workload: str, found: Sequence[Crossover]) -> bytes:
    """CPU time / GPU time against size on log–log axes, per dtype; kernel solid, end to end dashed; the crossover
    (interpolated where possible) marked with a dotted vertical line."""
    fig = _figure()
    ax = fig.add_subplot()
    colors: dict[str, Any] = {}
    for c in found:
        if not c.points:
            continue
        color = colors.setdefault(c.group, f"C{len(colors)}")
        style = "-" if c.mode == "kernel" else "--"
        label = f"{c.group or workload} ({'kernel' if c.mode == 'kernel' else 'end to end'})"
        ax.plot([p.x for p in c.points], [p.speedup for p in c.points], style, marker="o", color=color, label=label)
        x = c.x_estimate or c.x
        if c.status in ("crosses", "gpu_always") and x and c.mode == "kernel":
            ax.axvline(x, color=color, linestyle=":", linewidth=1.2)
            ax.annotate(f"crossover ≈ {x:,.0f}", (x, 1.0), color=color, fontsize=8, rotation=90, va="bottom")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(size_axis(workload))
    ax.set_ylabel("speedup = CPU time / GPU time")
    ax.set_title(f"{workload}: GPU speedup over the best CPU backend (above 1: GPU faster)")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _png(fig)


def compute_ceilings(rows: Sequence[Result]) -> dict[str, tuple[float, str]]:
    """Per device, the best GEMM rate measured in this run (FLOP/s, dtype): the roofline's compute ceiling."""
    best: dict[str, tuple[float, str]] = {}
    for r in rows:
        if r.workload == "gemm" and r.ok and r.tflops:
            dev = "cpu" if r.device == "cpu" else "gpu"
            if r.tflops * 1e12 > best.get(dev, (0.0, ""))[0]:
                best[dev] = (r.tflops * 1e12, r.size_group or str(r.dtype))
    return best


@dataclass(frozen=True)
class Roof:
    device: str  # gpu | cpu
    bandwidth_gbps: float | None  # the memory roof: measured copy bandwidth
    compute_flops: float | None  # the compute roof: best GEMM measured in the run (FLOP/s)
    compute_dtype: str
    compute_source: str  # "measured GEMM" | "datasheet" | ""


def roofs(run: Run, spec_peak_flops: float | None = None) -> list[Roof]:
    """Per device, the two roofs from this run's ceilings: memory bandwidth × intensity and the best GEMM rate.
    A GPU whose GEMM was not measured gets its datasheet peak, labelled as such; a CPU gets no compute roof."""
    peaks = compute_ceilings(run.results)
    c = run.ceilings
    out = []
    for dev, bw in (("gpu", c.d2d_copy_gbps), ("cpu", c.cpu_mem_gbps)):
        peak = peaks.get(dev)
        if peak:
            out.append(Roof(dev, bw, peak[0], peak[1], "measured GEMM"))
        elif dev == "gpu" and spec_peak_flops and bw:
            out.append(Roof(dev, bw, spec_peak_flops, "bf16", "datasheet"))
        elif bw:
            out.append(Roof(dev, bw, None, "", ""))
    return out


def roofline_figure(run: Run, spec_peak_flops: float | None = None) -> tuple[Figure, str]:
    """Achieved FLOP/s against arithmetic intensity (FLOP per byte moved) for every result with both counts, under
    each device's two roofs (memory: measured bandwidth × intensity; compute: best measured GEMM), and a caption
    saying what they are. The axes cover the points and the roofs' ridge points, not decades of empty space."""
    fig = _figure(7.5, 4.8)
    ax = fig.add_subplot()
    rows = [r for r in run.results if r.ok and r.kernel_median_s and r.flops and r.bytes]
    points = [
        (r.flops / r.bytes, r.flops / r.kernel_median_s, r) for r in rows if r.flops and r.bytes and r.kernel_median_s
    ]
    found = roofs(run, spec_peak_flops)
    xs = [x for x, _, _ in points] + [
        f.compute_flops / (f.bandwidth_gbps * 1e9) for f in found if f.compute_flops and f.bandwidth_gbps
    ]
    lo, hi = (min(xs) / 3, max(xs) * 3) if xs else (0.05, 500.0)
    ys = [y for _, y, _ in points]
    caption = []
    for f in found:
        color = "C0" if f.device == "gpu" else "C1"
        bw = (f.bandwidth_gbps or 0.0) * 1e9
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        if bw:
            mem = [x * bw for x in grid]
            roof = [min(m, f.compute_flops) for m in mem] if f.compute_flops else mem
            ax.plot(
                grid, roof, color=color, linewidth=1.6, label=f"{f.device} memory roof: {f.bandwidth_gbps:,.0f} GB/s"
            )
            ys += [roof[0], roof[-1]]
            caption.append(f"{f.device.upper()} memory roof {f.bandwidth_gbps:,.0f} GB/s (measured copy)")
        if f.compute_flops:
            style = "--" if f.compute_source == "datasheet" else ":"
            what = f"{f.compute_flops / 1e12:,.1f} TFLOP/s ({f.compute_source}, {f.compute_dtype})"
            ax.axhline(
                f.compute_flops, color=color, linestyle=style, linewidth=1.2, label=f"{f.device} compute roof: {what}"
            )
            ys.append(f.compute_flops)
            caption.append(f"{f.device.upper()} compute roof {what}")
        elif bw:
            caption.append(f"{f.device.upper()} compute roof not measured (run gpukit bench gemm)")
    markers: dict[str, str] = {}
    for x, y, r in points:
        m = markers.setdefault(r.workload, "osD^vP*Xh<>"[len(markers) % 11])
        ax.scatter(x, y, marker=m, color="C1" if r.device == "cpu" else "C0", s=22, alpha=0.75, zorder=3)
    for name, m in markers.items():
        ax.scatter([], [], marker=m, color="gray", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    positive = [y for y in ys if y and y > 0]
    if positive:
        ax.set_ylim(min(positive) / 3, max(positive) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline against the roofs measured in this run (blue GPU, orange CPU)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    axes = f"x {lo:.3g}–{hi:.3g} FLOP/byte, y {ax.get_ylim()[0]:.3g}–{ax.get_ylim()[1]:.3g} FLOP/s (log–log)"
    return fig, "; ".join([*caption, axes])


def roofline_plot(run: Run, spec_peak_flops: float | None = None) -> bytes:
    """The roofline as PNG bytes (see :func:`roofline_figure`)."""
    return _png(roofline_figure(run, spec_peak_flops)[0])


def bars_plot(workload: str, rows: Sequence[Result]) -> bytes:
    """Throughput by backend at the largest size each backend measured, one bar per (backend, dtype)."""
    return _png(bars_figure(workload, rows))


def bars_figure(workload: str, rows: Sequence[Result]) -> Figure:
    """The figure of :func:`bars_plot`."""
    best: dict[str, tuple[float, float, str]] = {}  # name → (size value, throughput, device)
    unit = None
    for r in rows:
        if r.workload != workload or not r.ok or r.throughput is None:
            continue
        x, group = r.size_x, r.size_group or ""
        name = f"{r.backend} {group}".strip()
        unit = r.throughput_unit
        if name not in best or (x or 0.0) > best[name][0]:
            best[name] = (x or 0.0, float(r.throughput), r.device)
    fig = _figure(7.0, 0.9 + 0.32 * max(len(best), 1))
    ax = fig.add_subplot()
    names = sorted(best, key=lambda n: best[n][1])
    ax.barh(names, [best[n][1] for n in names], color=["C1" if best[n][2] == "cpu" else "C0" for n in names])
    label = THROUGHPUT_UNITS[unit][1] if unit else "throughput"
    # Always a log axis: backends differ by orders of magnitude, and every bar chart of the report reads the same
    # way (a linear axis for one workload and a log one for the next misleads). Each bar is labelled with its value.
    if names:
        ax.set_xscale("log")
        values = [best[n][1] for n in names]
        ax.set_xlim(min(values) / 3, max(values) * 6)
        _plain_log_ticks(ax.xaxis, min(values) / 3, max(values) * 6)
        for i, v in enumerate(values):
            ax.annotate(
                f"{v:,.0f} {label}" if v >= 100 else f"{v:.3g} {label}",
                (v, i),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=7,
            )
    ax.set_xlabel(f"{label} at the largest size measured, log scale (orange CPU, blue GPU)")
    ax.set_title(f"{workload}: throughput by backend")
    ax.grid(True, axis="x", which="major", alpha=0.3)
    ax.set_axisbelow(True)
    if not names:
        ax.text(0.5, 0.5, "no successful rows", ha="center", transform=ax.transAxes)
    return fig
