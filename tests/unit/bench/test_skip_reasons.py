"""Why a row was not measured, said right: a sweep's out-of-time rows that could never have run here carry their real
reason, and only backends that cannot run are listed as not available (issue 26, item 2)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gpukit.bench.request import BenchRequest
from gpukit.bench.results import Result, Run
from gpukit.bench.runner import execute
from gpukit.cli import bench_render, render


def _no_gpu() -> bool:
    from gpukit.bench.backends import get_backend

    return not get_backend("torch-cuda").availability().ok


needs_no_gpu = pytest.mark.skipif(not _no_gpu(), reason="a GPU is here: its rows would run")


def _out_of_time_sweep() -> Run:
    """A sweep whose time budget is spent before its first row: nothing is measured."""
    req = BenchRequest(
        workloads=("vector-add",),
        backends=("numpy", "python", "torch-cuda"),
        sweep=True,
        sweep_total_s=1e-9,
        ceilings=False,
    )
    return execute(req)


def _printed(run: Run, monkeypatch: pytest.MonkeyPatch, width: int = 200) -> str:
    buf = io.StringIO()
    monkeypatch.setattr(render, "console", Console(file=buf, width=width, highlight=False, soft_wrap=False))
    bench_render.print_run(run)
    return buf.getvalue()


@needs_no_gpu
def test_sweep_rows_that_could_never_run_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _out_of_time_sweep()
    gpu = [r for r in run.results if r.device == "cuda"]
    cpu = [r for r in run.results if r.device == "cpu"]
    assert gpu and cpu and not any(r.ok for r in run.results)
    assert all(r.skip_cause == "unavailable" and "sweep" not in (r.reason or "") for r in gpu)
    assert all(r.skip_cause == "sweep-budget" and "sweep time budget" in (r.reason or "") for r in cpu)
    text = _printed(run, monkeypatch)
    folded = [line for line in text.splitlines() if "GPU row(s) not run" in line]
    assert folded and all("torch-cuda" in line and "sweep time budget" not in line for line in folded)
    assert "not available" not in text  # numpy and python can run: the budget, not the machine, stopped them
    assert "raise --sweep-budget" in text  # their reason, under the table


def test_not_available_lists_only_backends_that_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [
        Result("mandelbrot", "numpy", "cpu", "32x32x20", status="skipped", reason="sweep time budget of 60 s spent",
               hint="raise --sweep-budget", skip_cause="sweep-budget"),
        Result("mandelbrot", "python", "cpu", "4096x4096x1000", status="skipped", reason="estimated 900 s per call",
               hint="raise --budget", skip_cause="estimate"),
        Result("mandelbrot", "numba-cpu", "cpu", "32x32x20", status="skipped", reason="numba is not installed",
               hint="pip install numba", skip_cause="unavailable"),
    ]  # fmt: skip
    text = _printed(Run(started_at="2026-12-01T00:00:00Z", results=rows), monkeypatch)
    line = next(line for line in text.splitlines() if line.startswith("not available"))
    assert "numba-cpu" in line and "numpy" not in line and "python" not in line


def test_rows_saved_before_skip_cause_are_read_from_their_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    old = [
        Result("saxpy", "torch-cpu", "cpu", "4KiB", status="skipped",
               reason="sweep time budget of 60 s spent before this size started", hint="raise --sweep-budget"),
        Result("saxpy", "numba-cpu", "cpu", "4KiB", status="skipped", reason="numba is not installed",
               hint="pip install numba"),
    ]  # fmt: skip
    text = _printed(Run(started_at="2026-12-01T00:00:00Z", results=old), monkeypatch)
    line = next(line for line in text.splitlines() if line.startswith("not available"))
    assert "numba-cpu" in line and "torch-cpu" not in line


def test_a_long_reason_is_shown_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = "estimated 26.3 s per call (~132 s to measure) exceeds the 10 s budget"
    hint = "pick a smaller --size for this backend, or raise --budget"
    rows = [Result("mandelbrot", "torch-cpu", "cpu", "1536x1024x20", status="skipped", reason=reason, hint=hint,
                   skip_cause="estimate")]  # fmt: skip
    text = _printed(Run(started_at="2026-12-01T00:00:00Z", results=rows), monkeypatch, width=200)
    assert "skipped ¹" in text
    assert f"¹ skipped: {reason} — hint: pick a smaller --size for this backend, or raise --budget" in text
    md = bench_render.to_markdown(Run(started_at="2026-12-01T00:00:00Z", results=rows))
    assert reason in md and "skipped ¹" in md


def test_an_estimate_far_from_the_measured_call_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    def row(backend: str, estimate: float) -> Result:
        times = {"kernel_median_s": 1.03, "kernel_min_s": 1.0, "kernel_max_s": 1.1, "estimate_s": estimate}
        return Result("mandelbrot", backend, "cpu", "1536x1024x20", giter_per_s=0.01, throughput_unit="giter_per_s",
                      **times)  # fmt: skip

    run = Run(started_at="2026-12-01T00:00:00Z", results=[row("torch-cpu", 26.3), row("numpy", 1.2)])
    text = " ".join(_printed(run, monkeypatch).split())
    assert (
        "mandelbrot torch-cpu 1536x1024x20: estimated 26.3 s per call before measuring, measured 1.03 s (26×)" in text
    )
    assert "numpy 1536x1024x20: estimated" not in text  # within 3× of what was measured


def test_quick_leaves_pure_python_out_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """--quick: pure Python's rows (10.8 s of an H200 host's 34 s) are skipped rows that say why; the other backends
    keep every size, and a full run, --backend python or an explicit --size measures Python at every size."""
    from gpukit.bench import runner

    def rows(backends: tuple[str, ...] = (), **kw: object) -> list[runner.Row]:
        req = BenchRequest(workloads=("mandelbrot", "vector-add"), backends=backends, device="cpu", **kw)  # type: ignore[arg-type]
        return runner.plan(runner.resolve_workloads(req), req)

    quick = rows(quick=True)
    assert len({(r.workload.name, r.size.label) for r in quick}) == 3  # mandelbrot's two sizes, vector-add's one
    skipped = sorted((r.workload.name, r.impl, r.size.label) for r in quick if r.skip is not None)
    python = sorted((r.workload.name, r.impl, r.size.label) for r in quick if r.impl == "python")
    assert skipped == python and len(python) == 3
    assert {r.impl for r in quick if r.skip is not None} == {"python"} and len(quick) > len(python)
    assert all(r.skip is None for r in rows())  # the full run
    assert all(r.skip is None for r in rows(quick=True, sizes=("seed",)))  # sizes named
    asked = rows(backends=("python", "numpy"), quick=True)  # pure Python asked for
    assert {r.impl for r in asked} == {"python", "numpy"} and all(r.skip is None for r in asked)

    row = next(r for r in quick if r.skip is not None)
    result = runner._planned_skip(row)
    assert (result.status, result.skip_cause) == ("skipped", "quick")
    assert result.reason == runner.QUICK_PYTHON_SKIP and "--backend python" in (result.hint or "")
    run = Run(id=None, started_at="t", duration_s=0.0, interrupted=False, machine={}, versions={}, settings={},
              results=[result])  # fmt: skip
    out = " ".join(_printed(run, monkeypatch).split())
    assert "skipped" in out and "--quick leaves pure Python out" in out
