"""`gpukit bench`: the same work on CPU and GPU, each way a Python developer can write it — checked numbers only.

Its tables, CSV and Markdown are drawn by `cli/bench_render.py`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpukit.bench.harness import CALL_TIMEOUT_S
from gpukit.cli import render, skip_teardown
from gpukit.cli.bench_render import print_baseline, print_crossovers, print_run, to_csv, to_markdown, write_output
from gpukit.cli.history import db_option, node_option

if TYPE_CHECKING:
    from gpukit.bench.baselines import BaselineCheck
    from gpukit.bench.request import BenchRequest
    from gpukit.bench.results import Run
    from gpukit.history import History


def _parse_tolerance(text: str) -> float:
    from gpukit.errors import ConfigError

    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise ConfigError(f"bad --tolerance '{text}'", hint="use a percentage like 10%") from None
    if not 0 <= value < 100:
        raise ConfigError(f"bad --tolerance '{text}'", hint="use a percentage between 0 and 100")
    return value


@contextlib.contextmanager
def _interruptible() -> Iterator[Callable[[], None]]:
    """While a run measures, SIGINT (Ctrl-C, ``timeout -s INT``) and SIGTERM stop it the same way: the first one
    raises KeyboardInterrupt, which the runner turns into ``interrupted=True`` with the rows so far; later ones
    only note it, so saving and printing the partial run are not cut short.

    Yields ``rearm``, called before each result: it installs the handler again (``signal.signal`` calls
    sigaction, so a native library that replaced the disposition — or reset it to the default, which kills the
    process with nothing saved — is overridden) and raises KeyboardInterrupt if a signal came but its exception
    was swallowed on the way (e.g. caught inside a framework's compile or thread pool)."""
    sigs = [signal.SIGINT, signal.SIGTERM]
    count = [0]

    def handler(signum: int, frame: Any) -> None:
        count[0] += 1
        if count[0] == 1:
            raise KeyboardInterrupt

    def rearm() -> None:
        for sig in sigs:
            signal.signal(sig, handler)
        if count[0]:
            raise KeyboardInterrupt

    old = {sig: signal.getsignal(sig) for sig in sigs}
    rearm()
    try:
        yield rearm
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)


def _quiet_warnings() -> None:
    """numba-cuda's low-occupancy warning for the small sizes of a ladder is expected there: noise in the log.
    The environment switch works when numba-cuda is imported later; the filter covers an earlier import."""
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    warnings.filterwarnings("ignore", message=r".*Grid size \d+ will likely result in GPU under-utilization")


def _progress_callback(rearm: Callable[[], None] | None = None) -> tuple[Any, Any]:
    """A rich progress bar on stderr when it is a terminal; otherwise one line per result on stderr, so a log shows
    how far a run got. The callback also re-arms the interrupt handler (see :func:`_interruptible`)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    tty = render.err_console.is_terminal
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.err_console,
        transient=True,
        disable=not tty,
    )
    task = bar.add_task("measuring", total=None)
    t0 = time.perf_counter()

    def callback(p: Any) -> None:
        if rearm is not None:
            rearm()
        _quiet_warnings()  # again: a framework imported since may have put its own filter in front
        if tty:
            bar.update(task, total=p.total, completed=p.index, description=f"{p.workload} {p.backend} {p.size}")
        else:
            elapsed = time.perf_counter() - t0
            sys.stderr.write(f"bench {elapsed:6.1f}s {p.workload} {p.index + 1}/{p.total}: {p.backend} {p.size}\n")
            sys.stderr.flush()

    return bar, callback


def _open_history(db: str | None, no_save: bool, node: str | None) -> History | None:
    """The history, validated before anything is measured (a bad --db costs milliseconds, not a run)."""
    if no_save:
        return None
    from gpukit.history import open_history

    return open_history(db, node=node)


def _save(history: History, run: Run) -> None:
    """Save ``run``; if that fails (disk full, a lock held past the busy timeout, a store refusing writes), write it
    beside the history as JSON and say how to import it — a measured run is never thrown away; the command then
    exits 2 after its report."""
    from gpukit.history import save_or_keep

    run_id, kept, exc = save_or_keep(history, "bench_run", run.to_dict())
    if exc is not None:
        render.error(f"{exc.message}; the run was written to {kept}", hint=f"gpukit history import {kept}")
    else:
        run.id = run_id


def _measured(request: BenchRequest, db: str | None, no_save: bool, node: str | None) -> Run:
    """Open the history, run the request with the progress display and the interrupt handling, then save the run
    (still under the handler, so a second Ctrl-C does not cut the save short)."""
    from gpukit.bench.runner import execute

    history = _open_history(db, no_save, node)
    _quiet_warnings()
    try:
        with _interruptible() as rearm:
            bar, callback = _progress_callback(rearm)
            with bar:
                run = execute(request, callback)
            if history is not None:
                _save(history, run)
    finally:
        if history is not None:
            history.close()
    return run


def bench(
    workloads: list[str] = typer.Argument(None, help="Workloads (default: vector-add saxpy mandelbrot bandwidth)."),
    backend: list[str] = typer.Option(None, "--backend", "-b", help="Backends or implementations (repeatable)."),
    device: str = typer.Option("all", "--device", "-d", help="cpu, cuda or all."),
    size: list[str] = typer.Option(None, "--size", "-s", help="Sizes, e.g. 1GiB, 64MiB:int32, 4096x4096x1000."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes, fewer repeats: a first look in about a minute."),
    repeat: int = typer.Option(
        None, "--repeat", "-n", min=1, help="Timed samples per result (default 10; quick: 5, and 3 of calls > 0.1 s)."
    ),
    budget: float = typer.Option(None, "--budget", min=0.1, help="Seconds per result (default 30; 10 quick; 5 sweep)."),
    energy: bool = typer.Option(False, "--energy", help="Run GPU kernels ≥ 1 s so NVML energy per call is read."),
    workload_file: list[str] = typer.Option(None, "--workload", "-w", help="Your own workload: FILE.py:NAME."),
    seed_example: bool = typer.Option(False, "--seed-example", help="The article's A=[1..6] + B=[7..12] everywhere."),
    save_image: Path = typer.Option(None, "--save-image", help="Write the Mandelbrot frame as a coloured PNG."),
    baseline: str = typer.Option(None, "--baseline", help="Compare with a baseline: run id, JSON file or name."),
    tolerance: str = typer.Option("10%", "--tolerance", help="A SLOWER row within this of --baseline still passes."),
    force: bool = typer.Option(False, "--force", help="Compare with a --baseline taken in another hardware state."),
    write_baseline: Path = typer.Option(None, "--write-baseline", help="Write this run as a baseline JSON file."),
    markdown: Path = typer.Option(None, "--markdown", help="Also write the tables as Markdown to this file."),
    no_ceilings: bool = typer.Option(False, "--no-ceilings", help="Skip measuring ceilings (no % of ceiling)."),
    sweep: bool = typer.Option(False, "--sweep", help="Sweep sizes and find the CPU/GPU crossover."),
    sweep_budget: float = typer.Option(
        240.0, "--sweep-budget", min=0, help="Seconds a whole --sweep may take; later sizes are skipped (0: no limit)."
    ),
    seed: int = typer.Option(None, "--seed", help="Random seed for the inputs, 0 to 2³²−1 (default: fresh)."),
    call_timeout: float = typer.Option(
        CALL_TIMEOUT_S, "--call-timeout", min=0, help="Seconds one call may take before its row fails (0: no limit)."
    ),
    noise_target: float = typer.Option(
        0.005, "--noise-target", min=0, max=0.99, help="Sample until MAD/median ≤ this (0: exactly --repeat samples)."
    ),
    max_time: float = typer.Option(None, "--max-time", min=0.01, help="Sampling seconds per row (3; quick 0.3)."),
    cache: str = typer.Option("auto", "--cache", help="hot, cold (L2/LLC flushed before each sample) or auto."),
    no_throttle_check: bool = typer.Option(
        False, "--no-throttle-check", help="Keep samples taken while the GPU throttled."
    ),
    ranks: int = typer.Option(None, "--ranks", "-r", help="Collectives: processes, one per GPU (default every GPU)."),
    dtype: list[str] = typer.Option(None, "--dtype", help="Collectives: fp32 and/or bf16 (repeatable; default fp32)."),
    timeout: float = typer.Option(
        None, "--timeout", help="Multi-GPU: seconds without progress before a rank is hung (120; scaling 300)."
    ),
    no_graph: bool = typer.Option(False, "--no-graph", help="Collectives: skip the CUDA-graph-captured rows."),
    model: str = typer.Option(None, "--model", "-m", help="Scaling: resnet18 | resnet50 (seed-cnn: tiny)."),
    max_gpus: int = typer.Option(None, "--max-gpus", min=1, help="Scaling: largest rank count (default every GPU)."),
    batch: int = typer.Option(None, "--batch", min=1, help="Scaling: images per rank per step (64 GPU, 8 CPU)."),
    image_size: int = typer.Option(None, "--image-size", min=1, help="Scaling: image side in pixels (224; 64)."),
    steps: int = typer.Option(None, "--steps", min=1, help="Scaling: timed steps per rank count (30 GPU, 6 CPU)."),
    as_json: bool = typer.Option(False, "--json", help="Print the run as JSON (see docs/bench-json.md)."),
    as_csv: bool = typer.Option(False, "--csv", help="Print the result rows as CSV."),
    db: str = db_option(),
    node: str = node_option(),
    no_save: bool = typer.Option(False, "--no-save", help="Do not record this run in the history."),
) -> int:
    """Measure workloads on CPU and GPU through every available backend; print only verified numbers."""
    from gpukit.bench.request import BenchRequest
    from gpukit.cli.bench_multi import MULTI_COMMANDS
    from gpukit.errors import ConfigError

    if workloads and workloads[0] in MULTI_COMMANDS:  # allreduce … p2p, scaling: a multi-GPU request
        from gpukit.cli.bench_multi import MultiOptions, run_multi

        if len(workloads) > 1:
            raise ConfigError(f"bench {workloads[0]} runs alone", hint=f"run: gpukit bench {workloads[0]} [options]")
        opts = MultiOptions(None if device == "all" else device, tuple(size or ()), repeat, quick, ranks,
                            tuple(dtype or ()), timeout, not no_graph, model, max_gpus, batch, image_size,
                            steps)  # fmt: skip
        return run_multi(workloads[0], opts, as_json, markdown, db, no_save, node)
    multi_only = {"--ranks": ranks, "--dtype": dtype, "--timeout": timeout is not None, "--no-graph": no_graph,
                  "--model": model, "--max-gpus": max_gpus, "--batch": batch, "--image-size": image_size,
                  "--steps": steps}  # fmt: skip
    if unused := [flag for flag, value in multi_only.items() if value]:
        raise ConfigError(
            f"{', '.join(unused)} belong to the multi-GPU benches",
            hint=f"use them with: gpukit bench {'|'.join(MULTI_COMMANDS)}",
        )

    tol = _parse_tolerance(tolerance)
    if save_image is not None and save_image.is_dir():
        raise ConfigError(
            f"--save-image {save_image} is a directory", hint=f"give a file name: {save_image / 'mandelbrot.png'}"
        )
    if sweep:
        given = {"--size": size, "--workload": workload_file, "--seed-example": seed_example, "--energy": energy,
                 "--save-image": save_image, "--baseline": baseline, "--write-baseline": write_baseline,
                 "--markdown": markdown, "--csv": as_csv, "--no-ceilings": no_ceilings}  # fmt: skip
        if unused := [flag for flag, value in given.items() if value]:  # silently dropped, a --baseline would "pass"
            raise ConfigError(
                f"--sweep does not take {', '.join(unused)}",
                hint="run those without --sweep; a sweep is written up by: gpukit report --last",
            )
    targets: list[Any] = list(workloads or [])
    if workload_file:
        from gpukit.bench.custom import load_workload

        targets += [load_workload(spec) for spec in workload_file]
    sizes = list(size or [])
    if seed_example:
        targets, sizes = ["vector-add"], ["seed-example"]
    request = BenchRequest(  # every flag maps onto one field; defaults are resolved by the request
        workloads=tuple(targets),
        backends=tuple(backend or ()),
        device=device,
        sizes=tuple(sizes),
        quick=quick,
        repeat=repeat,
        energy=energy,
        ceilings=not (no_ceilings or seed_example),
        seed=seed,
        budget_s=budget,
        call_timeout_s=call_timeout if call_timeout > 0 else None,
        sweep=sweep,
        sweep_total_s=sweep_budget if sweep_budget > 0 else None,
        noise_target=noise_target,
        max_time_s=max_time,
        cache=cache,
        throttle_check=not no_throttle_check,
        extra=(("command", "gpukit " + " ".join(sys.argv[1:])),),  # as typed (under a test runner: its argv)
    )
    _check_plan(request)  # unknown workloads, backends and sizes before the history or the ceilings are touched
    # Before measuring: a wrong --baseline must not cost a whole run (and a run id is read before this run is saved).
    baseline_doc = _load_baseline(baseline, db) if baseline else None
    if baseline_doc is not None:  # a baseline of another hardware state is refused before anything is measured
        from gpukit.bench.baselines import refuse_or_mark
        from gpukit.bench.runner import hardware_state

        refuse_or_mark(baseline_doc, hardware_state(), force, "this machine and the baseline", _scope(baseline))
    run = _measured(request, db, no_save, node)
    if sweep:
        code = _report_sweep(run, as_json)
    else:
        judge = (tol, force)
        code = _report(run, baseline, baseline_doc, judge, write_baseline, markdown, save_image, as_json, as_csv, db)
    skip_teardown()  # saved, printed, files written: finalizing torch and numba cost ~1 s of a 2-core --quick
    return 2 if not no_save and run.id is None else code  # the store refused the run (kept in a file): exit 2


def _check_plan(request: BenchRequest) -> None:
    from gpukit.bench.runner import plan, resolve_workloads

    plan(resolve_workloads(request), request)


def _scope(ref: str | None) -> str:
    """A stored run (an id) was taken on this machine: every state difference counts. A baseline file (shipped or
    written on another node) is a reference for a GPU model: only the model and its settings must match."""
    return "machine" if ref is not None and ref.isdigit() else "model"


def _load_baseline(ref: str, db: str | None) -> dict[str, Any]:
    from gpukit.bench import baselines as compare

    if not ref.isdigit():
        return compare.load_baseline(ref)
    from gpukit.history import open_history

    with open_history(db, create=False) as history:
        return compare.load_baseline(ref, history)


def _history_runs(db: str | None, run: Run) -> list[Run]:
    """The history's newest runs (their medians give a written baseline its run-to-run bands); none when this run
    was not saved to a history."""
    from gpukit.bench.baselines import recent_runs
    from gpukit.history import open_history

    if run.id is None:
        return []
    with open_history(db, create=False) as history:
        return recent_runs(history)


def _report(
    run: Run,
    baseline: str | None,
    baseline_doc: dict[str, Any] | None,
    judge: tuple[float, bool],
    write_baseline: Path | None,
    markdown: Path | None,
    save_image: Path | None,
    as_json: bool,
    as_csv: bool,
    db: str | None = None,
) -> int:
    from gpukit.bench import baselines as compare

    tol, force = judge
    checks: list[BaselineCheck] = []
    if baseline_doc is not None:
        checks = compare.check_baseline(run, baseline_doc, tol, force=force, scope=_scope(baseline))
    if write_baseline:
        doc = compare.baseline_from_run(run, run.settings.get("command"), others=_history_runs(db, run))
        write_output(write_baseline, render.to_json(doc) + "\n")
    if markdown:
        write_output(markdown, to_markdown(run))
    if save_image:
        from gpukit.bench.image import save_mandelbrot_png

        frames = [r.size for r in run.results if r.workload == "mandelbrot"]
        save_mandelbrot_png(save_image, frames[0] if frames else "seed")
    if as_json:
        doc = run.to_dict()
        if baseline:
            doc["baseline"] = {"ref": baseline, "tolerance_pct": tol, "checks": [c.to_dict() for c in checks]}
        render.print_json(doc)
    elif as_csv:
        sys.stdout.write(to_csv(run.results))
    else:
        print_run(run)
        if checks:
            print_baseline(checks, tol)
        if run.id is not None:
            render.console.print(f"saved as run {run.id} (gpukit history show {run.id})")
    if run.interrupted:
        return 130
    if baseline_doc is not None and all(c.verdict in ("not run", "skipped") for c in checks):  # checked nothing
        command = baseline_doc.get("command")
        skipped = [c for c in checks if c.verdict == "skipped"]
        if skipped:
            why = next((r.reason for r in run.results if r.status == "skipped" and r.reason), "not available here")
            render.error(
                f"nothing to compare: {len(skipped)} of the {len(checks)} baseline rows skipped here ({why})",
                hint=next((r.hint for r in run.results if r.status == "skipped" and r.hint), None)
                or "run it where the baseline's backends are available",
            )
            return 2
        render.error(
            f"this run measured none of the {len(checks)} rows of baseline {baseline}",
            hint=f"run what the baseline ran: {command}" if command else "use the baseline's workloads and sizes",
        )
        return 2
    failed = [r for r in run.results if r.status == "failed"]
    short = [c for c in checks if not c.ok and c.verdict != "failed"]
    if short:
        render.error(f"{len(short)} result(s) slower than baseline {baseline} by more than {tol:g}%")
    if broken := [c for c in checks if c.verdict == "failed"]:
        render.error(f"{len(broken)} baseline row(s) failed here (see the table)")
    short += broken
    return 1 if failed or short else 0


def _report_sweep(run: Run, as_json: bool) -> int:
    """`--sweep`: the rows, then the crossover table (issue 3)."""
    from gpukit.bench.sweep import crossovers

    _print_walls(run)
    if as_json:
        render.print_json(run.to_dict())
    else:
        print_run(run)
        print_crossovers(run, crossovers(run.results))
        if run.id is not None:
            render.console.print(f"saved as run {run.id} (gpukit report --run {run.id} -o report.html)", soft_wrap=True)
    if run.interrupted:
        return 130
    return 1 if any(r.status == "failed" for r in run.results) else 0


def _print_walls(run: Run) -> None:
    """One stderr line with the sweep's wall time per workload (also in the run's settings), and what it missed."""
    walls = run.settings.get("workload_s") or {}
    total = sum(walls.values())
    parts = ", ".join(f"{name} {secs:.0f} s" for name, secs in walls.items())
    line = f"sweep took {total:.0f} s: {parts}"
    if missing := run.settings.get("missing_workloads"):
        line += f"; not measured (interrupted): {', '.join(missing)}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _help() -> str:
    """The command's help: its docstring and the workloads it knows (names from the registry, nothing imported)."""
    from gpukit.bench.sweep import SWEEP_WORKLOADS
    from gpukit.bench.workloads import DEFAULT_WORKLOADS, WORKLOADS

    names = ", ".join(f"{n} (default)" if n in DEFAULT_WORKLOADS else n for n in WORKLOADS)
    return (
        f"{(bench.__doc__ or '').strip()}\n\nWorkloads: {names}. Your own: --workload FILE.py:NAME "
        f"(docs/custom-workload.md). --sweep runs {' '.join(SWEEP_WORKLOADS)} over size ladders and finds the "
        "CPU/GPU crossover. Multi-GPU: allreduce, allgather, reducescatter, broadcast, alltoall (--ranks, --dtype, "
        "--no-graph, --timeout), p2p, scaling (--model, --max-gpus, --batch, --image-size, --steps): "
        "docs/multi-gpu.md."
    )


def register(app: typer.Typer) -> None:
    """Add `gpukit bench` (the multi-GPU benches are its workloads allreduce … p2p, scaling: cli/bench_multi.py)."""
    app.command("bench", help=_help())(bench)
