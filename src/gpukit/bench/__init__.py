"""The measuring engine behind `gpukit bench`: workloads × backends × sizes, each result verified and timed honestly.

Public API::

    from gpukit.bench import run, Workload, Implementation, Size
    bench_run = run(["vector-add"], backends=["numpy", "torch-cpu"], quick=True)
    for row in bench_run.results: ...

See ``docs/custom-workload.md`` for measuring your own function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gpukit.bench.results import Ceilings, Result, Run
from gpukit.bench.workloads.base import Implementation, Size, Workload

if TYPE_CHECKING:
    from gpukit.bench.harness import Progress

__all__ = ["Ceilings", "Implementation", "Result", "Run", "Size", "Workload", "run"]


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
    progress: Callable[[Progress], None] | None = None,
) -> Run:
    """Measure ``workloads`` (registry names or :class:`Workload` objects; None = every registered default workload)
    on ``backends`` (None = all available on ``device``: "cpu", "cuda" or "all") at ``sizes`` (size labels, parsed by
    each workload; None = its default sizes, smaller with ``quick``).

    ``repeat`` is the number of timed samples (default 10, 5 with quick); ``energy`` repeats GPU kernels until NVML
    energy can be read (≥ 1 s); ``budget_s`` is the time budget of one result,
    default 30 s, 10 s with quick (an implementation estimated or
    measured to exceed it is skipped / cut short, with the reason). ``progress`` is called before each
    result.
    Returns the :class:`Run` with ceilings measured in the same run and every row, including skipped and failed
    ones. KeyboardInterrupt stops early and returns the rows measured so far with ``interrupted=True``.
    """
    from gpukit.bench.runner import run_all

    return run_all(
        workloads,
        backends=backends,
        device=device,
        sizes=sizes,
        quick=quick,
        repeat=repeat,
        energy=energy,
        measure_ceilings=ceilings,
        seed=seed,
        budget_s=budget_s,
        progress=progress,
    )
