"""Ceilings measured in the same run, with datasheet peaks beside them (labelled ``spec_*``).

They are the bandwidth workload's own rows at one size: CPU memory (copy over all cores), GPU device-to-device copy,
host↔device pinned and pageable — measured through the same harness, so they are checked and timed like any result.
A ceiling that cannot be measured here stays None (shown "n/a"), with a note saying why.
"""

from __future__ import annotations

from gpukit.bench.harness import Prepared, Settings, prepare, run_one
from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads.bandwidth import WORKLOAD as BANDWIDTH
from gpukit.hardware.cpu import cpu_budget

__all__ = ["CEILING_ROWS", "CEILING_SIZES", "add_spec", "measure_ceilings"]

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


# The size each ceiling is measured at, the same with and without --quick (a --quick device copy at 64 MiB read
# 3,923 GB/s on an H200 where a 1 GiB copy in the same minute read 4,157-4,196: 6 % low). Out of every cache; the
# device copy at 1 GiB like the reference measurement (MEASURING.md), the host sides at 256 MiB (a pageable copy of
# 1 GiB takes ~0.2 s a call).
CEILING_SIZES: dict[str, str] = {"d2d_copy_gbps": "1GiB"}
DEFAULT_CEILING_SIZE = "256MiB"
SMALLER_SIZE = "256MiB"  # where the device has no room for two 1 GiB buffers


def measure_ceilings(quick: bool = False, cuda: bool = True, seed: int = 0) -> Ceilings:
    """Measure the ceilings (CPU always; GPU ones when ``cuda``). ``quick`` takes fewer samples, never a smaller
    size: a ceiling is the fastest sample, and 5 samples of an out-of-cache copy find it within a per cent."""
    import numpy as np

    settings = Settings(repeats=5 if quick else 10, warmup=1, budget_s=10.0, noise_target=0.0)  # the fastest sample
    rng = np.random.default_rng(seed)
    prepared: dict[str, Prepared] = {}
    ceilings = Ceilings(cpu_threads=cpu_budget())
    for field, rows in CEILING_ROWS.items():
        if field in CUDA_FIELDS and not cuda:
            continue
        best: Result | None = None
        for label in dict.fromkeys((CEILING_SIZES.get(field, DEFAULT_CEILING_SIZE), SMALLER_SIZE)):
            size = BANDWIDTH.parse_size(label)
            if label not in prepared:
                prepared[label] = prepare(BANDWIDTH, size, rng)
            notes = []
            for name in rows:
                if quick and field == "d2d_copy_gbps" and best is not None:
                    break  # quick: one device copy (torch and CuPy read within 0.2 % on an H200; 1.5-2 s each)
                r = run_one(BANDWIDTH, name, size, prepared[label], settings)
                if r.ok and r.gbps is not None and (best is None or r.gbps > (best.gbps or 0.0)):
                    best = r
                elif not r.ok:
                    notes.append(f"{field} via {name} at {label}: {r.status}: {r.reason}")
            if best is not None:
                ceilings.measured_at[field] = size.label
                if best.size_x is not None:
                    ceilings.measured_x[field] = best.size_x
                break
            ceilings.notes += notes
        if best is not None and best.kernel_min_s:
            # A ceiling is the best the machine did: the fastest sample, not the median.
            setattr(ceilings, field, (best.gbps or 0.0) * (best.kernel_median_s or 0.0) / best.kernel_min_s)
    if cuda:
        add_spec(ceilings)
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


def add_spec(ceilings: Ceilings) -> None:
    """The datasheet row of GPU 0 beside the measured ceilings (also without them: plausibility needs it)."""
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
    ceilings.spec_tflops = dict(spec.tflops)
