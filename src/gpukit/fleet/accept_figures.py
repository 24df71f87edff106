"""The acceptance figures, measured by the bench engine: each one a (workload, implementation, size) row of
`gpukit bench`, run through :func:`gpukit.bench.harness.run_one` — the same inputs, reference, poisoned outputs,
checks before and after the timed calls, and plausibility against the datasheet (``bench.analyse``). Nothing here
times anything itself.

On CUDA: bf16 and fp8 GEMM 8192³ through cuBLAS (fp8 skipped with the reason below sm_89), the HBM copy and the
triad (``saxpy``: out = alpha·x + y, three 1 GiB streams), and pinned host↔device copies of 1 GiB. With
``--device cpu`` the same engine measures the host: fp32 GEMM, memory copy and triad, at sizes CI can afford.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpukit.bench.harness import Prepared, Settings, prepare, run_one
from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads import get_workload
from gpukit.bench.workloads.base import Size, Workload
from gpukit.fleet.record import FIGURES, Figure

__all__ = [
    "FigurePlan",
    "Measurer",
    "Target",
    "cpu_plan",
    "cuda_plan",
    "figure_from_row",
    "missing_figure",
    "on_device",
    "plausibility",
]


@dataclass(frozen=True)
class FigurePlan:
    """One figure: the bench row that measures it."""

    name: str  # a key of record.FIGURES
    workload: str  # bench workload registry name
    impl: str
    size: str
    settings: tuple[tuple[str, Any], ...] = ()  # harness Settings fields that differ from FIGURE_SETTINGS


# A GEMM figure is the power-capped steady state, read over samples long enough to average the power cap's own
# regulation. On an H200 (700 W) ten 20 ms samples straddled the drop from the 1980 MHz boost and spread 7.85 % over
# seven runs; 300 calls of warm-up and twenty 100 ms samples still spread 3.83 % over four runs, because at the cap
# the SM clock moves between 1290 and 1620 MHz from one 100 ms sample to the next (13-30 % within a run). The soak,
# the same GEMM in 1 s samples, held 0.16-0.30 % in every run of two sessions. So: 1000 calls of warm-up (~1.6 s of
# bf16, ~0.9 s of fp8: the boost is over), then five samples of ~1 s each.
STEADY_GEMM = (("warmup", 1000), ("target_sample_s", 1.0), ("repeats", 5))


@dataclass(frozen=True)
class Target:
    """One device under test: its CUDA index (None on the CPU) and its NVML index (None: no telemetry)."""

    index: int
    cuda_index: int | None
    nvml_index: int | None
    uuid: str | None
    model: str
    serial: str | None = None


def cuda_plan() -> tuple[FigurePlan, ...]:
    return (
        FigurePlan("gemm_bf16_tflops", "gemm", "cublas", "8192:bf16", STEADY_GEMM),
        FigurePlan("gemm_fp8_tflops", "gemm", "cublas", "8192:fp8", STEADY_GEMM),
        FigurePlan("hbm_copy_gbps", "bandwidth", "torch-cuda", "1GiB"),
        FigurePlan("hbm_triad_gbps", "saxpy", "torch-cuda", "1GiB"),
        FigurePlan("h2d_pinned_gbps", "bandwidth", "torch-cuda-h2d-pinned", "1GiB"),
        FigurePlan("d2h_pinned_gbps", "bandwidth", "torch-cuda-d2h-pinned", "1GiB"),
    )


def cpu_plan(mem_size: str = "64MiB", gemm_n: int = 512) -> tuple[FigurePlan, ...]:
    return (
        FigurePlan("gemm_fp32_tflops", "gemm", "torch-cpu", f"{gemm_n}:fp32"),
        FigurePlan("mem_copy_gbps", "bandwidth", "torch-cpu", mem_size),
        FigurePlan("mem_triad_gbps", "saxpy", "torch-cpu", mem_size),
    )


# Each sample lasts ≥ 20 ms (a 8192³ bf16 GEMM is ~1.5 ms on an H200: 14 back-to-back calls a sample), 10 samples:
# long enough that one launch gap or timer tick is < 0.1 % of a sample, short enough that the figures take ~0.2 s of
# device time each; the host's inputs, reference and checks take the rest.
FIGURE_SETTINGS = Settings(repeats=10, warmup=2, budget_s=10.0, target_sample_s=0.02, call_timeout_s=60.0)


class Measurer:
    """Measures figures on targets, building each workload × size's host inputs and reference once for every GPU
    (thread-safe: the GPUs of a node are measured at the same time, one thread each)."""

    def __init__(self, seed: int = 0, settings: Settings = FIGURE_SETTINGS) -> None:
        self.settings = settings
        self._seed = seed
        self._cache: dict[tuple[str, str], Prepared] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def workload(self, name: str) -> Workload:
        return get_workload(name)

    def prepared(self, workload: Workload, size: Size) -> Prepared:
        key = (workload.name, size.label)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._cache:
                salt = zlib.crc32(f"{workload.name}:{size.label}".encode())  # the same inputs whatever the order
                self._cache[key] = prepare(workload, size, np.random.default_rng([self._seed, salt]))
            return self._cache[key]

    def prefetch(self, plans: Sequence[FigurePlan]) -> None:
        """Build the host inputs and references of ``plans`` on background threads, one per workload × size, while
        the first figures are measured (NumPy's generators and BLAS release the GIL; on the H200 host this takes
        the ~8 s of a 1 GiB triad's and two 8192² GEMMs' inputs off the run's critical path)."""
        keys: dict[tuple[str, str], tuple[Workload, Size]] = {}
        for plan in plans:
            w = self.workload(plan.workload)
            size = w.parse_size(plan.size)
            keys.setdefault((w.name, size.label), (w, size))
        for w, size in keys.values():
            t = threading.Thread(target=self.prepared, args=(w, size), daemon=True, name="gpukit-accept-inputs")
            t.start()
            self._threads.append(t)

    def measure(
        self, plan: FigurePlan, target: Target, settings: Settings | None = None, workload: Workload | None = None
    ) -> Result:
        """One figure's bench row on ``target`` (never raises: a failure is a failed row with its reason).
        ``workload`` replaces the registry's (the soak's wrapped GEMM); its inputs are still the registry's."""
        workload = workload or self.workload(plan.workload)
        size = workload.parse_size(plan.size)
        s = settings or replace(self.settings, **dict(plan.settings))
        s = replace(s, gpu_index=target.nvml_index if target.nvml_index is not None else -1)
        try:
            return on_device(
                target, lambda: run_one(workload, plan.impl, size, lambda: self.prepared(workload, size), s)
            )
        except Exception as exc:  # selecting the device itself failed (a lost GPU, a dead driver): the row says so
            return _failed_row(workload, plan, target, size, exc)

    def release(self) -> None:
        """Drop the host inputs (several GiB on CUDA), once every background build has ended."""
        for t in self._threads:
            t.join()
        self._threads.clear()
        with self._lock:
            self._cache.clear()


def _failed_row(workload: Workload, plan: FigurePlan, target: Target, size: Size, exc: Exception) -> Result:
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    device = "cuda" if target.cuda_index is not None else "cpu"
    reason = f"{type(exc).__name__}: {text}"
    return Result(workload.name, plan.impl, device, size.label, status="failed", reason=reason,
                  throughput_unit=workload.unit)  # fmt: skip


def on_device(target: Target, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` with ``target``'s GPU as this thread's current CUDA device (nothing to set on the CPU)."""
    if target.cuda_index is None:
        return fn()
    import torch

    with torch.cuda.device(target.cuda_index):
        return fn()


def plausibility(rows: list[Result], target: Target) -> None:
    """Fail rows the hardware cannot have produced (above the datasheet peak of ``target``'s model, or a memory row
    far above the copy measured in the same run), as `gpukit bench` does."""
    from gpukit.bench.analyse import analyse
    from gpukit.hardware.specs import match_spec

    ceilings = Ceilings(gpu_name=target.model)
    spec = match_spec(target.model) if target.cuda_index is not None else None
    if spec is not None:
        ceilings.spec_name, ceilings.spec_bandwidth_gbps = spec.name, spec.bandwidth_gbps
        ceilings.spec_tflops = dict(spec.tflops)
    for r in rows:  # the HBM copy bounds the triad (one copy is a firm ceiling on a GPU; a shared CPU's is not)
        if r.ok and r.workload == "bandwidth" and r.backend == "torch-cuda":
            ceilings.d2d_copy_gbps = r.gbps
    analyse(rows, ceilings, {})


def missing_figure(name: str, reason: str) -> Figure:
    """A figure that was not measured (its device failed earlier in the run): failed, with the reason."""
    spec = FIGURES[name]
    return Figure(value=None, unit=spec.unit, higher_is_better=spec.higher_is_better, status="failed", reason=reason)


def figure_from_row(name: str, row: Result) -> Figure:
    """The acceptance figure of one bench row: its value only when the row is ok (checked and plausible)."""
    spec = FIGURES[name]
    fig = Figure(value=None, unit=spec.unit, higher_is_better=spec.higher_is_better, status=row.status,
                 reason=row.reason, rel_error=row.error)  # fmt: skip
    if row.ok and row.throughput is not None:
        fig.value = float(row.throughput)
        med = float(np.median(row.samples_s)) if row.samples_s else 0.0
        fig.spread = (max(row.samples_s) - min(row.samples_s)) / med if med > 0 else None
    after = (row.telemetry or {}).get("after") or {}
    if after:
        fig.telemetry = {"sm_clock_mhz": after.get("sm_clock_mhz"), "mem_clock_mhz": after.get("mem_clock_mhz"),
                         "power_w": after.get("power_w"), "temp_c": after.get("temperature_c"),
                         "throttle_reasons": list(after.get("throttle_reasons") or [])}  # fmt: skip
    return fig
