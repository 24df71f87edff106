"""The report's multi-GPU plots, from the typed multi-GPU rows a run's results carry (``Result.multi``):
busbw against message size (one line per op × dtype × graph mode, the highest busbw measured in the run drawn as
the measured ceiling, the datasheet link speed beside it, labelled), the P2P matrix as a heat map, and DDP scaling
(images/s against ranks, with the ideal line)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpukit.bench.results import Run

if TYPE_CHECKING:
    from gpukit.bench.report import Plot

__all__ = ["multi_gpu_plots"]

# Their section is the report's "throughput" (report.SECTIONS): a multi-GPU run's results are throughputs.


def _datasheet_link_gbps(run: Run) -> tuple[float, str] | None:
    from gpukit.hardware.specs import match_spec

    gpus = run.machine.get("gpus") or run.machine.get("gpu_names") or []
    spec = match_spec(str(gpus[0])) if gpus else None
    if spec is None or not spec.interconnect_gbps:
        return None
    return float(spec.interconnect_gbps), f"{spec.name} {spec.interconnect} (datasheet, one way)"


def busbw_plot(rows: list[dict[str, Any]], run: Run) -> bytes:
    from gpukit.bench.report_plots import _figure, _png

    fig = _figure()
    ax = fig.add_subplot()
    lines: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("busbw_gbps"):
            key = f"{r['op']} {r['dtype']} ×{r['ranks']} {r['graph']}"
            lines.setdefault(key, []).append((int(r["size_bytes"]), float(r["busbw_gbps"])))
    for key, pts in sorted(lines.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                linestyle="--" if key.endswith("captured") else "-", label=key)  # fmt: skip
    peak = max((b for pts in lines.values() for _, b in pts), default=None)
    if peak:
        ax.axhline(peak, color="k", linestyle=":", label=f"measured ceiling (highest busbw here) {peak:.3g} GB/s")
    sheet = _datasheet_link_gbps(run)
    if sheet and any(r.get("device") == "cuda" for r in rows):
        ax.axhline(sheet[0], color="C3", linestyle="-.", label=f"{sheet[1]}: {sheet[0]:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s, NCCL's convention)")
    ax.set_title("collectives: bus bandwidth against message size")
    ax.grid(True, which="both", alpha=0.3)
    if lines:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no successful rows", ha="center", transform=ax.transAxes)
    return _png(fig)


def p2p_heatmap(rows: list[dict[str, Any]]) -> bytes:
    from gpukit.bench.collectives.p2p import matrix
    from gpukit.bench.collectives.results import P2PRow
    from gpukit.bench.report_plots import _figure, _png

    typed = [P2PRow.from_dict(r) for r in rows]
    gpus, m = matrix(typed)
    links = {(r.src, r.dst): r.link for r in typed}
    fig = _figure(5.5, 4.5)
    ax = fig.add_subplot()
    if not gpus:
        reason = next((r.reason for r in typed if r.reason), "no pair measured")
        ax.text(0.5, 0.5, f"unavailable: {reason}", ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_axis_off()
        return _png(fig)
    values = [[v if v is not None else float("nan") for v in row] for row in m]
    im = ax.imshow(values, cmap="viridis")
    fig.colorbar(im, ax=ax, label="GB/s, one way, peer access on")
    for i, a in enumerate(gpus):
        for j, b in enumerate(gpus):
            if m[i][j] is not None:
                ax.text(j, i, f"{m[i][j]:.0f}\n{links.get((a, b)) or ''}", ha="center", va="center", fontsize=7,
                        color="w")  # fmt: skip
    ax.set_xticks(range(len(gpus)), [f"GPU {g}" for g in gpus])
    ax.set_yticks(range(len(gpus)), [f"GPU {g}" for g in gpus])
    ax.set_xlabel("destination")
    ax.set_ylabel("source")
    ax.set_title("peer-to-peer copy bandwidth")
    return _png(fig)


def scaling_plot(rows: list[dict[str, Any]]) -> bytes:
    from gpukit.bench.report_plots import _figure, _png

    fig = _figure()
    ax = fig.add_subplot()
    ok = sorted((r["ranks"], r["images_per_s"]) for r in rows if r.get("status") == "ok" and r.get("images_per_s"))
    if ok:
        ax.plot([n for n, _ in ok], [v for _, v in ok], marker="o", label="measured")
        one = next((v for n, v in ok if n == 1), None)
        if one:
            ax.plot([n for n, _ in ok], [one * n for n, _ in ok], linestyle=":", color="k", label="ideal (N × one)")
        ax.legend()
    ax.set_xlabel("ranks")
    ax.set_ylabel("images/s, all ranks")
    ax.set_title("DDP training: scaling")
    ax.grid(True, alpha=0.3)
    return _png(fig)


def multi_gpu_plots(run: Run) -> list[Plot]:
    """The plots for a multi-GPU run; none for any other run."""
    from gpukit.bench.collectives.results import rows_of
    from gpukit.bench.report import Plot

    typed = rows_of(run)
    if not typed:
        return []
    rows = [r.to_dict() for r in typed]
    kind = typed[0].KIND
    if kind == "collective":
        return [Plot("busbw", "throughput", "busbw against message size", busbw_plot(rows, run))]
    if kind == "p2p":
        return [Plot("p2p-heatmap", "throughput", "peer-to-peer copy bandwidth", p2p_heatmap(rows))]
    if kind == "scaling":
        return [Plot("scaling", "throughput", "DDP scaling", scaling_plot(rows))]
    return []
