"""A custom workload for issue 24's comparison check: the same torch add doing ``1 + GPUKIT_SHIFT`` times the work.

``SHIFT_ADD`` adds two 256 MiB float32 vectors on the GPU (the checked output) and then the same add over an extra
tail, sized so the whole call does ``(1 + shift)`` times the work of the ``shift = 0`` call: the main add is the
same, the tail is 10 % of it at shift 0 and ``1.1 × (1 + shift) − 1`` of it otherwise. The name and the size label
do not change with the shift, so `gpukit history compare` matches the rows of a shift-0 run and a shifted run.

    GPUKIT_SHIFT=0.02 gpukit bench -w benchmarks/scripts/engine_shift_workload.py:SHIFT_ADD --size 256MiB \
        --device cuda --no-ceilings
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gpukit.bench.workloads import get_workload
from gpukit.bench.workloads.base import Implementation, Size

SHIFT = float(os.environ.get("GPUKIT_SHIFT", "0"))
TAIL = 1.1 * (1 + SHIFT) - 1  # of the main add's elements


def _prepare(inputs: Mapping[str, Any], size: Size) -> dict[str, Any]:
    import torch

    a = torch.from_numpy(inputs["a"]).to("cuda")
    b = torch.from_numpy(inputs["b"]).to("cuda")
    m = max(1, round(TAIL * a.numel()))
    return {"a": a, "b": b, "ta": a[:m].clone(), "tb": b[:m].clone(), "tail": torch.empty(m, device="cuda")}


def _add(d: Mapping[str, Any], out: Any, size: Size) -> None:
    import torch

    torch.add(d["a"], d["b"], out=out)  # the checked output
    torch.add(d["ta"], d["tb"], out=d["tail"])  # the extra work (1.1 × (1 + shift) − 1 of it)


SHIFT_ADD = replace(
    get_workload("vector-add"),
    name="shift-add",
    description=f"vector add plus a tail: {1 + SHIFT:.3f} × the work of shift 0",
    implementations={"torch-cuda": Implementation("torch-cuda", _add, prepare=_prepare)},
)
