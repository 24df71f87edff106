"""Ceilings measured in the same run, with datasheet peaks beside them (labelled ``spec_*``).

They are the bandwidth workload's own rows at one size: CPU memory (copy over all cores), GPU device-to-device copy,
host↔device pinned and pageable — measured through the same harness, so they are checked and timed like any result.
A ceiling that cannot be measured here stays None (shown "n/a"), with a note saying why.
"""

from __future__ import annotations

import os

from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads.bandwidth import WORKLOAD as BANDWIDTH
from gpukit.bench.workloads.base import Size

__all__ = ["CEILING_ROWS", "measure_ceilings"]

# Ceilings field → the bandwidth rows that measure it (the best ok one wins)
CEILING_ROWS: dict[str, tuple[str, ...]] = {
    "cpu_mem_gbps": ("numba-cpu", "torch-cpu", "numpy"),
    "d2d_copy_gbps": ("torch-cuda", "cupy"),
    "h2d_pinned_gbps": ("torch-cuda-h2d-pinned",),
    "h2d_pageable_gbps": ("torch-cuda-h2d-pageable",),
    "d2h_pinned_gbps": ("torch-cuda-d2h-pinned",),
    "d2h_pageable_gbps": ("torch-cuda-d2h-pageable",),
}
CUDA_FIELDS = ("d2d_copy_gbps", "h2d_pinned_gbps", "h2d_pageable_gbps", "d2h_pinned_gbps", "d2h_pageable_gbps")


def measure_ceilings(quick: bool = False, cuda: bool = True, seed: int = 0) -> Ceilings:
    """Measure the ceilings (CPU always; GPU ones when ``cuda``). 256 MiB buffers, 64 MiB with ``quick``."""
    import numpy as np

    size: Size = BANDWIDTH.parse_size("64MiB" if quick else "256MiB")
    settings = Settings(repeats=5, warmup=1, budget_s=10.0)
    rng = np.random.default_rng(seed)
    prep = prepare(BANDWIDTH, size, rng)
    ceilings = Ceilings(cpu_threads=_usable_cpus())
    for field, rows in CEILING_ROWS.items():
        if field in CUDA_FIELDS and not cuda:
            continue
        best: Result | None = None
        for name in rows:
            r = run_one(BANDWIDTH, name, size, prep, settings)
            if r.ok and r.gbps is not None and (best is None or r.gbps > (best.gbps or 0.0)):
                best = r
            elif not r.ok:
                ceilings.notes.append(f"{field} via {name}: {r.status}: {r.reason}")
        if best is not None and best.kernel_min_s:
            # A ceiling is the best the machine did: the fastest sample, not the median.
            setattr(ceilings, field, (best.gbps or 0.0) * (best.kernel_median_s or 0.0) / best.kernel_min_s)
    if cuda:
        _add_spec(ceilings)
    return ceilings


def _gpu_name() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:
        pass
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None


def _add_spec(ceilings: Ceilings) -> None:
    from gpukit.hardware.specs import match_spec

    ceilings.gpu_name = _gpu_name()
    if ceilings.gpu_name is None:
        return
    spec = match_spec(ceilings.gpu_name)
    if spec is None:
        ceilings.notes.append(f"no datasheet entry matches '{ceilings.gpu_name}'")
        return
    ceilings.spec_name = spec.name
    ceilings.spec_bandwidth_gbps = spec.bandwidth_gbps
    ceilings.spec_fp32_tflops = spec.peak_tflops("fp32")


def _usable_cpus() -> int | None:
    """CPUs this process may run on (taskset, cgroups' cpusets), not all the host has: the CPU rows use these."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count()
