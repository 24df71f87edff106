"""Size sweeps and the CPU/GPU crossover: from which size on is the GPU faster?

:func:`run_sweep` measures each workload over a ladder of sizes on every CPU and GPU backend (one run, one set of
ceilings). :func:`crossovers` reads the rows of any run and, per workload and dtype, finds the size from which the
GPU is faster — once comparing kernel times only, once end to end (host→device + kernel + device→host).

How noise and flip-flops are treated. At each size the best CPU row is compared with the best GPU row. The GPU
*wins* there when even its slowest sample beats the CPU's fastest ([min, max] of the samples do not overlap, GPU
below); it *loses* when the reverse holds; otherwise the two are a *tie* (the difference is inside the run-to-run
spread, MEASURING.md rule 6). The crossover is the smallest size that the GPU wins and after which it never falls
behind again — neither loses nor ties with the CPU's median ahead — so a lucky win below a loss does not count, ties
the GPU leads on median do not undo it, and a GPU that wins at one size and trails (within the spread) at every
larger one has no crossover within the sizes measured. Between the last
size the GPU did not win and the crossover size, the point where the speedup passes 1 is interpolated on log–log
axes (speedup ∝ size^k between two neighbours), labelled as an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpukit.bench.request import SWEEP_BUDGET_S, SWEEP_TOTAL_S
from gpukit.bench.results import Result, Run

if TYPE_CHECKING:
    from gpukit.bench.harness import Progress

__all__ = [
    "SWEEP_BUDGET_S",
    "SWEEP_SIZES",
    "SWEEP_TOTAL_S",
    "SWEEP_WORKLOADS",
    "Crossover",
    "SizePoint",
    "crossovers",
    "find_crossover",
    "run_sweep",
    "size_axis",
]

# The workloads `gpukit bench --sweep` runs by default, and their ladders (size labels each workload parses).
# A workload not listed here sweeps over its own default sizes.
# Ordered by what matters most if a run is cut short (Ctrl-C keeps the rows measured so far).
SWEEP_WORKLOADS: list[str] = ["gemm", "cnn-train", "mlp-train", "mandelbrot", "vector-add", "saxpy"]
# Bounded so a whole sweep fits in about 150 s on a 16-core H200 host (and finishes on a 2-core CPU machine):
# a crossover needs a ladder on both sides only for the dtypes the CPU runs too.
_VECTOR_LADDER = ["4KiB", "64KiB", "1MiB", "16MiB", "256MiB"]
_GEMM_LADDER = (64, 128, 256, 512, 1024, 2048, 4096)
_BATCHES = (1, 8, 32, 128, 512)
SWEEP_SIZES: dict[str, list[str]] = {
    "gemm": [f"{n}:{dt}" for dt in ("fp32", "bf16") for n in _GEMM_LADDER]
    # bf16 8192³: cuBLAS against the Triton GEMM (the CPU row is skipped on the per-result budget, with the reason);
    # the other GPU dtypes at one size, where the tensor cores are busy — no CPU to cross over with.
    + ["8192:bf16"]
    + [f"4096:{dt}" for dt in ("tf32", "fp16", "fp8", "int8")],
    "cnn-train": [f"{b}:{dt}" for dt in ("fp32", "bf16") for b in _BATCHES],
    # a tiny MLP: the CPU wins at small batches, the GPU only when the batch keeps it busy
    "mlp-train": [f"{b}:{dt}" for dt in ("fp32", "bf16") for b in (*_BATCHES, 2048, 8192)],
    "vector-add": _VECTOR_LADDER,
    "saxpy": _VECTOR_LADDER,
    # the seed's 20 iterations at growing frames, the seed's own 1536×1024 among them
    "mandelbrot": ["32x32x20", "128x128x20", "512x512x20", "1536x1024x20", "2048x2048x20"],
}

# What the number in a workload's size label means (axis titles of the report).
_AXIS = {
    "gemm": "n (M = N = K)",
    "cnn-train": "batch size",
    "mlp-train": "batch size",
    "mandelbrot": "pixels × iterations",
    "vector-add": "bytes per operand",
    "saxpy": "bytes per operand",
}


def size_axis(workload: str) -> str:
    """The axis title for a workload's sizes."""
    return _AXIS.get(workload, "size")


@dataclass(frozen=True)
class SizePoint:
    """Best CPU against best GPU at one size, in the chosen mode (kernel or end to end)."""

    label: str
    x: float
    cpu_backend: str
    gpu_backend: str
    cpu_s: float
    gpu_s: float
    cpu_range_s: tuple[float, float]
    gpu_range_s: tuple[float, float]

    @property
    def speedup(self) -> float:
        """CPU time / GPU time: above 1 the GPU is faster."""
        return self.cpu_s / self.gpu_s

    @property
    def verdict(self) -> str:
        """ "gpu" (wins beyond the spread), "cpu" (loses beyond it) or "tie"."""
        if self.gpu_range_s[1] < self.cpu_range_s[0]:
            return "gpu"
        if self.cpu_range_s[1] < self.gpu_range_s[0]:
            return "cpu"
        return "tie"


@dataclass(frozen=True)
class Crossover:
    """Where the GPU starts to win for one workload and group (dtype), in one mode.

    ``status``: "crosses" (CPU wins or ties below ``size_label``, GPU from there on), "gpu_always" (the GPU wins
    from the smallest size measured), "never" (the GPU does not stay ahead up to the largest size measured),
    "insufficient" (fewer than two sizes with both a CPU and a GPU result). ``x_estimate`` is the interpolated
    size where the speedup passes 1 (None when it cannot be estimated).
    """

    workload: str
    group: str
    mode: str  # "kernel" | "end_to_end"
    status: str
    size_label: str | None = None
    x: float | None = None
    x_estimate: float | None = None
    below_label: str | None = None
    points: list[SizePoint] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "group": self.group,
            "mode": self.mode,
            "status": self.status,
            "size": self.size_label,
            "x": self.x,
            "x_estimate": self.x_estimate,
            "below": self.below_label,
            "axis": size_axis(self.workload),
            "points": [
                {
                    "size": p.label,
                    "x": p.x,
                    "cpu": p.cpu_backend,
                    "gpu": p.gpu_backend,
                    "cpu_s": p.cpu_s,
                    "gpu_s": p.gpu_s,
                    "speedup": p.speedup,
                    "verdict": p.verdict,
                }
                for p in self.points
            ],
        }


def find_crossover(workload: str, group: str, mode: str, points: Sequence[SizePoint]) -> Crossover:
    """Apply the rule in the module docstring to points of one workload/group (any order)."""
    pts = sorted(points, key=lambda p: p.x)
    if len(pts) < 2:
        return Crossover(workload, group, mode, "insufficient", points=pts)
    verdicts = [p.verdict for p in pts]
    # behind: a loss, or a tie in which the CPU's median is the faster (an H200 sweep had the MLP's GPU win at batch
    # 128 and trail by 7-28 % on median at 512-8192, inside the CPU's spread: "GPU faster from 128" misled)
    behind = [v == "cpu" or (v == "tie" and p.speedup < 1.0) for v, p in zip(verdicts, pts, strict=True)]
    last_loss = max((i for i, b in enumerate(behind) if b), default=-1)
    first = next((i for i in range(last_loss + 1, len(pts)) if verdicts[i] == "gpu"), None)
    if first is None:
        return Crossover(workload, group, mode, "never", points=pts)
    if first == 0:
        return Crossover(workload, group, mode, "gpu_always", pts[0].label, pts[0].x, None, None, pts)
    lo, hi = pts[first - 1], pts[first]
    return Crossover(workload, group, mode, "crosses", hi.label, hi.x, _interpolate(lo, hi), lo.label, pts)


def _interpolate(lo: SizePoint, hi: SizePoint) -> float | None:
    """Size where log(speedup) crosses 0, linear in log(size) between two neighbours; None if it does not."""
    s0, s1 = math.log(lo.speedup), math.log(hi.speedup)
    if not (s0 <= 0.0 < s1) or lo.x <= 0 or hi.x <= lo.x:
        return None
    x0, x1 = math.log(lo.x), math.log(hi.x)
    return math.exp(x0 + (x1 - x0) * (-s0) / (s1 - s0))


def _times(r: Result, mode: str) -> tuple[float, float, float] | None:
    """(median, min, max) seconds per call of a row in a mode; end to end adds the one-off transfers to every sample."""
    if not r.ok or r.kernel_median_s is None or r.call_s is None:
        return None
    # per call from Python (Result.call_s); a launch-bound row's device spread is scaled onto its launch time
    f = r.call_s / r.kernel_median_s if r.kernel_median_s > 0 else 1.0
    lo = (r.kernel_min_s if r.kernel_min_s is not None else r.kernel_median_s) * f
    hi = (r.kernel_max_s if r.kernel_max_s is not None else r.kernel_median_s) * f
    extra = 0.0
    if mode == "end_to_end":
        extra = (r.h2d_s or 0.0) + (r.d2h_s or 0.0)
    return r.call_s + extra, lo + extra, hi + extra


def _best(rows: Iterable[Result], mode: str) -> tuple[Result, tuple[float, float, float]] | None:
    timed = [(r, t) for r in rows if (t := _times(r, mode)) is not None]
    return min(timed, key=lambda rt: rt[1][0]) if timed else None


def crossovers(results: Iterable[Result], modes: Sequence[str] = ("kernel", "end_to_end")) -> list[Crossover]:
    """Crossovers for every workload/group that has CPU and GPU rows, in each mode, in a stable order."""
    groups: dict[tuple[str, str], dict[str, list[Result]]] = {}
    xs: dict[str, float] = {}
    for r in results:
        if r.size_x is None:
            continue
        xs[r.size] = r.size_x
        groups.setdefault((r.workload, r.size_group or ""), {}).setdefault(r.size, []).append(r)
    out: list[Crossover] = []
    for (workload, group), by_size in sorted(groups.items()):
        for mode in modes:
            points = []
            for label, rows in by_size.items():
                cpu = _best((r for r in rows if r.device == "cpu"), mode)
                gpu = _best((r for r in rows if r.device != "cpu"), mode)
                if cpu is None or gpu is None:
                    continue
                (cr, ct), (gr, gt) = cpu, gpu
                points.append(SizePoint(label, xs[label], cr.backend, gr.backend, ct[0], gt[0], ct[1:], gt[1:]))
            if points:
                out.append(find_crossover(workload, group, mode, points))
    return out


def run_sweep(
    workloads: Sequence[str] | None = None,
    *,
    backends: Sequence[str] | None = None,
    device: str = "all",
    quick: bool = False,
    repeat: int | None = None,
    seed: int | None = None,
    budget_s: float = SWEEP_BUDGET_S,
    total_s: float | None = SWEEP_TOTAL_S,
    progress: Callable[[Progress], None] | None = None,
) -> Run:
    """Measure each workload over its sweep ladder on CPU and GPU, in one run with one set of ceilings: the same
    path as :func:`gpukit.bench.run` (``BenchRequest(sweep=True)``).

    ``run.settings["sweep"]`` is True and ``run.settings["crossovers"]`` holds :func:`crossovers` of the rows as
    dicts. ``budget_s`` bounds one result; ``total_s`` the whole sweep: results not started by then are
    ``skipped`` rows with the reason (None: no bound). ``settings["workload_s"]`` holds each workload's wall time;
    ``settings["missing_workloads"]`` those an interrupt left unmeasured.
    """
    from gpukit.bench.request import BenchRequest
    from gpukit.bench.runner import execute

    request = BenchRequest(
        workloads=tuple(workloads or ()),
        backends=tuple(backends or ()),
        device=device,
        quick=quick,
        repeat=repeat,
        seed=seed,
        budget_s=budget_s,
        sweep=True,
        sweep_total_s=total_s,
    )
    return execute(request, progress)
