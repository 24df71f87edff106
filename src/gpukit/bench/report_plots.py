"""The report's plots as PNG bytes (matplotlib, Agg backend, no display): speedup vs size with the crossover marked,
a roofline placing every result against the ceilings measured in the run, and per-workload bars by backend."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpukit.bench.results import THROUGHPUT_UNITS, Result, Run
from gpukit.bench.sweep import Crossover, parse_label, size_axis

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["bars_plot", "compute_ceilings", "roofline_plot", "speedup_plot"]


def _figure(width: float = 7.0, height: float = 4.2) -> Figure:
    import matplotlib

    matplotlib.use("Agg", force=True)  # no display; safe in CI and on headless GPU machines
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


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
                best[dev] = (r.tflops * 1e12, parse_label(r.size)[1] or str(r.dtype))
    return best


def roofline_plot(run: Run, spec_peak_flops: float | None = None) -> bytes:
    """Achieved FLOP/s against arithmetic intensity (FLOP per byte moved) for every result with both counts, under
    the measured bandwidth × intensity and the best measured GEMM rate of its device."""
    fig = _figure(7.5, 4.8)
    ax = fig.add_subplot()
    rows = [r for r in run.results if r.ok and r.kernel_median_s and r.flops and r.bytes]
    peaks = compute_ceilings(run.results)
    c = run.ceilings
    bands = {"gpu": c.d2d_copy_gbps, "cpu": c.cpu_mem_gbps}
    intensities = [r.flops / r.bytes for r in rows if r.flops and r.bytes] or [0.1, 100.0]
    lo, hi = min(intensities) / 4, max(intensities) * 4
    for dev, color in (("gpu", "C0"), ("cpu", "C1")):
        bw = bands[dev]
        peak = peaks.get(dev)
        if bw:
            xs = [lo, hi] if not peak else [lo, peak[0] / (bw * 1e9), hi]
            ys = [min(x * bw * 1e9, peak[0]) if peak else x * bw * 1e9 for x in xs]
            ax.plot(
                xs,
                ys,
                color=color,
                linewidth=1.5,
                label=f"{dev}: measured {bw:,.0f} GB/s"
                + (f", GEMM {peak[1]} {peak[0] / 1e12:,.1f} TFLOP/s" if peak else ""),
            )
        elif peak:
            ax.axhline(
                peak[0], color=color, linewidth=1.5, label=f"{dev}: GEMM {peak[1]} {peak[0] / 1e12:,.1f} TFLOP/s"
            )
    if spec_peak_flops:
        ax.axhline(spec_peak_flops, color="C0", linestyle="--", linewidth=1, label="GPU datasheet peak (bf16 dense)")
    markers: dict[str, str] = {}
    for r in rows:
        assert r.flops and r.bytes and r.kernel_median_s
        m = markers.setdefault(r.workload, "osD^vP*Xh<>"[len(markers) % 11])
        color = "C1" if r.device == "cpu" else "C0"
        ax.scatter(r.flops / r.bytes, r.flops / r.kernel_median_s, marker=m, color=color, s=22, alpha=0.75)
    for name, m in markers.items():
        ax.scatter([], [], marker=m, color="gray", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline against the ceilings measured in this run (blue GPU, orange CPU)")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def bars_plot(workload: str, rows: Sequence[Result]) -> bytes:
    """Throughput by backend at the largest size each backend measured, one bar per (backend, dtype)."""
    best: dict[str, tuple[float, float, str]] = {}  # name → (size value, throughput, device)
    unit = None
    for r in rows:
        if r.workload != workload or not r.ok or r.throughput is None:
            continue
        x, group = parse_label(r.size)
        name = f"{r.backend} {group}".strip()
        unit = r.throughput_unit
        if name not in best or (x or 0.0) > best[name][0]:
            best[name] = (x or 0.0, float(r.throughput), r.device)
    fig = _figure(7.0, 0.9 + 0.32 * max(len(best), 1))
    ax = fig.add_subplot()
    names = sorted(best, key=lambda n: best[n][1])
    ax.barh(names, [best[n][1] for n in names], color=["C1" if best[n][2] == "cpu" else "C0" for n in names])
    label = THROUGHPUT_UNITS[unit][1] if unit else "throughput"
    if names and max(best[n][1] for n in names) / max(min(best[n][1] for n in names), 1e-300) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(f"{label} at the largest size measured (orange CPU, blue GPU)")
    ax.set_title(f"{workload}: throughput by backend")
    ax.grid(True, axis="x", alpha=0.3)
    if not names:
        ax.text(0.5, 0.5, "no successful rows", ha="center", transform=ax.transAxes)
    return _png(fig)
