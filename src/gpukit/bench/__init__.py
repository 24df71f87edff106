"""The measuring engine behind `gpukit bench`: workloads × backends × sizes, each result verified and timed honestly.

Public API (pinned by ``tests/unit/bench/test_public_api.py``)::

    from gpukit.bench import compare, run, BenchRequest, Workload, Implementation, Size
    rows = compare({"numpy": f, "torch-cuda": g}, inputs=..., reference=...)   # your own function, one call
    bench_run = run(["vector-add"], backends=["numpy", "torch-cpu"], quick=True)
    for row in bench_run.results: ...

``run`` is ``execute(BenchRequest(...))``: request → plan → measure → analyse (``bench/runner.py``). In a test, the
``gpukit_bench`` pytest fixture (``bench/pytest_plugin.py``) measures a function with the same checks. See
``docs/measure-your-function.md`` and ``docs/custom-workload.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gpukit.bench.watchdog import CALL_TIMEOUT_S
from gpukit.lazy import lazy_exports

if TYPE_CHECKING:
    from gpukit.bench.harness import Progress
    from gpukit.bench.oneshot import compare
    from gpukit.bench.request import BenchRequest
    from gpukit.bench.results import Ceilings, Result, Run
    from gpukit.bench.workloads.base import Implementation, Size, Workload

# Imported when first used (PEP 562): the ``gpukit_bench`` pytest plugin lives in this package and is loaded by
# every pytest run where gpukit is installed, so importing the package must not import NumPy and the harness.
_LAZY = {
    "BenchRequest": "gpukit.bench.request",
    "Ceilings": "gpukit.bench.results",
    "Implementation": "gpukit.bench.workloads.base",
    "Result": "gpukit.bench.results",
    "Run": "gpukit.bench.results",
    "Size": "gpukit.bench.workloads.base",
    "Workload": "gpukit.bench.workloads.base",
    "compare": "gpukit.bench.oneshot",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "CALL_TIMEOUT_S",
    "BenchRequest",
    "Ceilings",
    "Implementation",
    "Result",
    "Run",
    "Size",
    "Workload",
    "compare",
    "execute",
    "run",
]


def execute(request: BenchRequest, progress: Callable[[Progress], None] | None = None) -> Run:
    """Run a :class:`BenchRequest`: plan → measure → analyse (the path `gpukit bench` takes)."""
    from gpukit.bench.runner import execute as _execute

    return _execute(request, progress)


def run(
    workloads: Sequence[str | Workload] | str | Workload | None = None,
    *,
    backends: Sequence[str] | None = None,
    device: str = "all",
    sizes: Sequence[str] | None = None,
    quick: bool = False,
    repeat: int | None = None,
    energy: bool = False,
    ceilings: bool = True,
    seed: int | None = None,
    budget_s: float | None = None,
    call_timeout_s: float | None = CALL_TIMEOUT_S,
    progress: Callable[[Progress], None] | None = None,
    noise_target: float | None = None,
    max_time_s: float | None = None,
    cache: str = "auto",
) -> Run:
    """Measure ``workloads`` (registry names or :class:`Workload` objects; None = every registered default workload)
    on ``backends`` (None = all available on ``device``: "cpu", "cuda" or "all") at ``sizes`` (size labels, parsed by
    each workload; None = its default sizes, smaller with ``quick``).

    ``repeat`` is the number of timed samples (default 10, 5 with quick); ``energy`` repeats GPU kernels until NVML
    energy can be read (≥ 1 s); ``budget_s`` is the time budget of one result,
    default 30 s, 10 s with quick (an implementation estimated or
    measured to exceed it is skipped / cut short, with the reason). ``progress`` is called before each
    result. ``noise_target`` (default 0.005; 0 takes exactly ``repeat`` samples) and ``max_time_s`` (default 3 s,
    0.3 s with quick) are noise-based stopping: each row samples until MAD / median ≤ the target or its time is up;
    ``cache`` is "auto", "hot" or "cold" (docs/bench-json.md).
    Returns the :class:`Run` with ceilings measured in the same run and every row, including skipped and failed
    ones. KeyboardInterrupt stops early and returns the rows measured so far with ``interrupted=True``.
    """
    from gpukit.bench.harness import NOISE_TARGET
    from gpukit.bench.request import BenchRequest
    from gpukit.bench.runner import execute
    from gpukit.bench.workloads.base import Workload

    if isinstance(workloads, str | Workload):
        workloads = [workloads]
    request = BenchRequest(
        workloads=tuple(workloads or ()),
        backends=tuple(backends or ()),
        device=device,
        sizes=tuple(sizes or ()),
        quick=quick,
        repeat=repeat,
        energy=energy,
        ceilings=ceilings,
        seed=seed,
        budget_s=budget_s,
        call_timeout_s=call_timeout_s,
        max_time_s=max_time_s,
        cache=cache,
        noise_target=NOISE_TARGET if noise_target is None else noise_target,
    )
    return execute(request, progress)
