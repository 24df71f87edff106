"""Rendering for `gpukit bench` and `gpukit history`: the results table, ceilings, CSV, Markdown, baseline checks."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from gpukit.cli import render

if TYPE_CHECKING:
    from gpukit.bench.baselines import BaselineCheck
    from gpukit.bench.results import Ceilings, Result, Run
    from gpukit.bench.sweep import Crossover


def write_output(path: Path, data: str | bytes) -> None:
    """Write a file the user asked for (--markdown, --write-baseline, a report) atomically; a path that cannot be
    written is a usage error with a hint, not a traceback."""
    from gpukit.errors import ConfigError
    from gpukit.train.checkpoint import atomic_write_bytes

    try:
        atomic_write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}", hint="give a writable path") from exc


CSV_FIELDS = (
    "workload",
    "backend",
    "device",
    "size",
    "status",
    "reason",
    "dtype",
    "check",
    "error",
    "compile_s",
    "h2d_s",
    "kernel_median_s",
    "kernel_min_s",
    "kernel_max_s",
    "launch_s",
    "d2h_s",
    "end_to_end_s",
    "throughput_unit",
    "gbps",
    "giter_per_s",
    "tflops",
    "samples_per_s",
    "pct_of_ceiling",
    "speedup",
    "speedup_e2e",
    "energy_j",
    "repeats",
)


def _throughput(r: Result) -> str:
    from gpukit.bench.results import THROUGHPUT_UNITS

    if r.throughput is None or r.throughput_unit is None:
        return render.NA
    return f"{r.throughput:,.4g} {THROUGHPUT_UNITS[r.throughput_unit][1]}"


def _kernel(r: Result) -> str:
    if not r.ok:
        reason = (r.reason or "").replace("\n", " ")
        return f"{r.status}: {reason[:60]}{'…' if len(reason) > 60 else ''}"
    spread = f"{render.fmt_seconds(r.kernel_min_s)}–{render.fmt_seconds(r.kernel_max_s)}"
    mark = f" {LAUNCH_MARK}" if r.launch_bound else ""
    noise = f" ±{r.rel_mad * 100:.1f}%" if r.rel_mad is not None else ""
    if r.settled is False:
        noise += f" {UNSETTLED_MARK}"
    cold = " cold" if r.cache == "cold" else ""
    return f"{render.fmt_seconds(r.kernel_median_s)} ({spread}){noise}{cold}{mark}"


LAUNCH_MARK = "‡"
UNSETTLED_MARK = "~"


def noise_note(results: list[Result]) -> str | None:
    """The footnote for rows that never settled and for discarded (throttled) samples, or None."""
    loose = [r for r in results if r.ok and r.settled is False]
    dropped = sum(sum(r.discarded.values()) for r in results)
    parts = []
    if loose:
        target = loose[0].noise_target or 0.0
        parts.append(
            f"{UNSETTLED_MARK} {len(loose)} row(s) never settled: their spread (±: MAD / median of the samples) "
            f"stayed above the {target:.1%} target until their sampling time ran out (--max-time); "
            "compare them with care"
        )
    if dropped:
        parts.append(f"{dropped} sample(s) discarded: taken while the GPU throttled (--json: discarded)")
    return "; ".join(parts) or None


def launch_note(results: list[Result]) -> str | None:
    """The footnote for rows whose host launch outlasts the kernel, or None when there are none."""
    bound = [r for r in results if r.launch_bound]
    if not bound:
        return None
    worst = max(bound, key=lambda r: (r.launch_s or 0.0) / (r.kernel_median_s or 1.0))
    return (
        f"{LAUNCH_MARK} launch-bound: the host took longer to issue each call than the GPU took to run it "
        f"(e.g. {worst.backend} {worst.size}: {render.fmt_seconds(worst.launch_s)} to launch, "
        f"{render.fmt_seconds(worst.kernel_median_s)} on the device). The kernel column is device time; throughput, "
        "speedup and end to end use the launch rate, what a loop calling it from Python gets (--json: launch_s)."
    )


def _transfers(r: Result) -> str:
    if not r.ok or r.h2d_s is None:
        return render.NA
    if r.device == "cpu" and not r.h2d_s and not r.d2h_s:
        return "—"
    return f"{render.fmt_seconds(r.h2d_s)} + {render.fmt_seconds(r.d2h_s)}"


def _check(r: Result) -> str:
    if r.check is None:
        return "—" if r.status == "skipped" else "✗"
    return "✓" if r.check else f"✗ {r.error:.2g}" if r.error is not None else "✗"


def results_rows(results: list[Result]) -> list[list[str]]:
    rows = []
    for r in results:
        rows.append(
            [
                r.workload,
                r.backend,
                r.device,
                r.size,
                render.fmt_seconds(r.compile_s) if r.ok else "",
                _transfers(r) if r.ok else "",
                _kernel(r),
                _throughput(r) if r.ok else "",
                _pct(r) if r.ok else "",
                (render.fmt(r.speedup, ".3g", "×") if r.speedup is not None else render.NA) if r.ok else "",
                _check(r),
            ]
        )
    return rows


def _pct(r: Result) -> str:
    text = render.fmt(r.pct_of_ceiling, ".0f", "%")
    return f"{text} {CEILING_MARK}" if r.ceiling_note else text


CEILING_MARK = "†"


def ceiling_notes(results: list[Result]) -> list[str]:
    """One footnote per row above 100 % of its ceiling: what the figure means (never a puzzle)."""
    return [
        f"{CEILING_MARK} {r.workload} {r.backend} {r.size}: {r.ceiling_note}"
        for r in results
        if r.ok and r.ceiling_note
    ]


RESULT_COLUMNS = (
    "workload",
    "backend",
    "device",
    "size",
    "first call",  # compile / JIT plus one run for the compiling backends; for NumPy or Python just the first call
    "transfers (h2d + d2h)",
    "kernel median (min–max)",
    "throughput",
    "% of ceiling",
    "speedup",
    "check",
)


def ceilings_rows(c: Ceilings) -> list[list[str]]:
    def gb(v: float | None) -> str:
        return render.fmt(v, ",.1f", "GB/s")

    rows = [
        ["CPU memory (copy, all cores)", gb(c.cpu_mem_gbps), ""],
        ["GPU device-to-device copy", gb(c.d2d_copy_gbps), gb(c.spec_bandwidth_gbps) if c.spec_name else render.NA],
        ["host→device pinned", gb(c.h2d_pinned_gbps), ""],
        ["device→host pinned", gb(c.d2h_pinned_gbps), ""],
        ["host→device pageable", gb(c.h2d_pageable_gbps), ""],
        ["device→host pageable", gb(c.d2h_pageable_gbps), ""],
    ]
    if c.spec_fp32_tflops is not None:
        rows.append(["FP32 (not measured)", render.NA, render.fmt(c.spec_fp32_tflops, ".1f", "TFLOP/s")])
    return rows


def _unavailable(r: Result) -> bool:
    """Skipped because its backend cannot run here (it carries the fix), not because of the budget or the size."""
    return r.status == "skipped" and bool(r.hint and r.reason) and not (r.reason or "").startswith("estimated")


def folded(results: list[Result]) -> tuple[list[Result], dict[str, tuple[int, str, str]]]:
    """The rows for the table, and the backends folded out of it: on a machine where no GPU row ran, every GPU
    row skipped for want of its backend becomes one line per backend (count, reason, install command)."""
    if any(r.device == "cuda" and not _unavailable(r) for r in results):
        return results, {}
    shown: list[Result] = []
    gone: dict[str, tuple[int, str, str]] = {}
    for r in results:
        if r.device == "cuda" and _unavailable(r):
            n, _, _ = gone.get(r.backend, (0, "", ""))
            gone[r.backend] = (n + 1, r.reason or "", r.hint or "")
        else:
            shown.append(r)
    return shown, gone


def print_run(run: Run) -> None:
    c = run.ceilings
    spec = f"datasheet ({c.spec_name})" if c.spec_name else "datasheet"
    render.console.print(render.table(["ceiling", "measured (this run)", spec], ceilings_rows(c), title="Ceilings"))
    shown, gone = folded(run.results)
    # Piped output is not wrapped at 80 columns: the table is the product, keep its rows on one line each.
    console = render.console if render.console.is_terminal else Console(highlight=False, soft_wrap=False, width=240)
    console.print(render.table(RESULT_COLUMNS, results_rows(shown), title="Results (speedup: kernel vs best CPU)"))
    if note := launch_note(run.results):
        render.console.print(f"[dim]{note}[/]")
    if note := noise_note(run.results):
        render.console.print(f"[dim]{escape(note)}[/]")
    for line in ceiling_notes(shown):
        render.console.print(f"[dim]{escape(line)}[/]")
    for backend, (n, reason, hint) in gone.items():
        render.console.print(
            f"[dim]{backend}: {n} GPU row(s) not run: {escape(reason)} — {render.hint_markup(hint)}[/]"
        )
    # One line per reason a backend is missing here, with the command that fixes it.
    missing: dict[tuple[str, str], list[str]] = {}
    for r in shown:
        if _unavailable(r) and r.hint and r.reason:
            names = missing.setdefault((r.reason, r.hint), [])
            if r.backend not in names:
                names.append(r.backend)
    for (reason, hint), names in missing.items():
        render.console.print(
            f"[dim]not available: {', '.join(names)}: {render.escape(reason)} — {render.hint_markup(hint)}[/]"
        )
    previews = [(r.backend, r.output_preview) for r in run.results if r.ok and r.output_preview is not None]
    for backend, values in previews:
        render.console.print(f"{backend:>20}: C = {values}")
    if run.interrupted:
        render.err_console.print("[yellow]interrupted: the rows above were measured before Ctrl-C[/]")


def to_csv(results: list[Result]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for r in results:
        writer.writerow(r.to_dict())
    return buf.getvalue()


def to_markdown(run: Run) -> str:
    """The ceilings and the results table as Markdown (for `benchmarks/` and $OUT)."""

    def table(columns: tuple[str, ...] | list[str], rows: list[list[str]]) -> str:
        lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
        return "\n".join(lines)

    c = run.ceilings
    head = [
        f"# gpukit bench — run {run.id if run.id is not None else '(unsaved)'}",
        "",
        f"- started: {run.started_at}, duration: {render.fmt_seconds(run.duration_s)}",
        f"- GPU: {c.gpu_name or 'none'}; CPU threads: {c.cpu_threads}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(run.versions.items())),
        "- settings: " + ", ".join(f"{k}={v}" for k, v in sorted(run.settings.items())),
        "",
        "## Ceilings",
        "",
        table(["ceiling", "measured (this run)", f"datasheet ({c.spec_name or 'n/a'})"], ceilings_rows(c)),
        "",
        "## Results",
        "",
        table(list(RESULT_COLUMNS), results_rows(run.results)),
        "",
    ]
    if note := launch_note(run.results):
        head += [note, ""]
    head += [line + "\n" for line in ceiling_notes(run.results)]
    return "\n".join(head)


CROSSOVER_COLUMNS = ("workload", "dtype", "mode", "GPU faster from", "estimate", "last size not won")
_NO_CROSSOVER = {"never": "not within the sizes measured", "insufficient": "too few sizes"}


def print_crossovers(run: Run, found: list[Crossover]) -> None:
    """The sweep's crossover table; when it is empty, why."""
    rows = [
        [
            c.workload,
            c.group or "-",
            c.mode,
            c.size_label
            or {"never": "not within the sizes measured", "insufficient": "too few sizes"}.get(c.status, ""),
            f"≈ {c.x_estimate:,.0f}" if c.x_estimate else "",
            c.below_label or "",
        ]
        for c in found
    ]
    title = "CPU/GPU crossover (kernel only, and end to end with transfers)"
    if rows:
        render.console.print(render.table(CROSSOVER_COLUMNS, rows, title=title))
        return
    render.console.print(f"{title}: none — {crossover_gap(run)}", soft_wrap=True)


def crossover_gap(run: Run) -> str:
    """Why a sweep found no size with both a CPU and a GPU row to compare."""
    ok = [r for r in run.results if r.ok]
    cpu, gpu = [r for r in ok if r.device == "cpu"], [r for r in ok if r.device != "cpu"]
    if not gpu:
        why = next((r.reason for r in run.results if r.device == "cuda" and r.reason), None)
        return "no GPU row was measured" + (f" ({why})" if why else "") + "; a crossover needs both sides"
    if not cpu:
        return "no CPU row was measured; a crossover needs both sides"
    both = {(r.workload, r.size) for r in cpu} & {(r.workload, r.size) for r in gpu}
    if not both:
        return "the CPU and the GPU rows were measured at different sizes (nothing to compare)"
    return "fewer than two sizes had both a CPU and a GPU row"


def print_baseline(checks: list[BaselineCheck], tolerance_pct: float) -> None:
    rows = [
        [
            c.workload,
            c.backend,
            c.device,
            c.size,
            render.fmt(c.expected, ",.4g"),
            render.fmt(c.measured, ",.4g"),
            render.fmt(c.ratio * 100 if c.ratio is not None else None, ".0f", "%"),
            (c.verdict if c.ok else f"[red]{c.verdict}[/]") + (" *" if c.state_differs else ""),
        ]
        for c in checks
    ]
    render.console.print(
        render.table(
            ["workload", "backend", "device", "size", "baseline", "measured", "of baseline", "verdict"],
            rows,
            title=f"Baseline check (tolerance {tolerance_pct:g}%)",
        )
    )


# ---- the command -----------------------------------------------------------------------------------------------
