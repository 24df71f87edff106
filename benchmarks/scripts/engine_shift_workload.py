"""Custom workloads for issue 24's comparison check: the same torch add doing 2 % or 5 % more work when shifted.

``SHIFT_ADD_2`` and ``SHIFT_ADD_5`` add two float32 vectors on the GPU (the checked output) and then the same add
over an extra tail, sized so that with ``GPUKIT_SHIFTED=1`` the whole call does 1.02 (1.05) times the work it does
with ``GPUKIT_SHIFTED=0``: the main add is the same, the tail is 10 % of it unshifted and ``1.1 × (1 + shift) − 1``
of it shifted. Names and size labels do not change with the shift, so `gpukit history compare` pairs the rows of an
unshifted and a shifted run; one run carries both, so a pair of runs gives one 2 % and one 5 % comparison.

    GPUKIT_SHIFTED=1 gpukit bench -w benchmarks/scripts/engine_shift_workload.py:SHIFT_ADD_2 \
        -w benchmarks/scripts/engine_shift_workload.py:SHIFT_ADD_5 --size 1GiB:float32 --device cuda --no-ceilings
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from gpukit.bench.workloads import Workload, get_workload
from gpukit.bench.workloads.base import Implementation, Size

SHIFTED = os.environ.get("GPUKIT_SHIFTED", "0") == "1"


def _tail(shift: float) -> float:
    """The extra add's share of the main add's elements."""
    return 1.1 * (1 + shift) - 1 if SHIFTED else 0.1


def _prepare_for(shift: float) -> Callable[[Mapping[str, Any], Size], dict[str, Any]]:
    def prepare(inputs: Mapping[str, Any], size: Size) -> dict[str, Any]:
        import torch

        a = torch.from_numpy(inputs["a"]).to("cuda")
        b = torch.from_numpy(inputs["b"]).to("cuda")
        m = max(1, round(_tail(shift) * a.numel()))
        return {"a": a, "b": b, "ta": a[:m].clone(), "tb": b[:m].clone(), "tail": torch.empty(m, device="cuda")}

    return prepare


def _add(d: Mapping[str, Any], out: Any, size: Size) -> None:
    import torch

    torch.add(d["a"], d["b"], out=out)  # the checked output
    torch.add(d["ta"], d["tb"], out=d["tail"])  # the extra work


def _shift_workload(shift: float) -> Workload:
    pct = round(shift * 100)
    return replace(
        get_workload("vector-add"),
        name=f"shift-add-{pct}",
        description=f"vector add plus a tail: {1 + shift:.2f} × the work when GPUKIT_SHIFTED=1",
        implementations={"torch-cuda": Implementation("torch-cuda", _add, prepare=_prepare_for(shift))},
    )


SHIFT_ADD_2 = _shift_workload(0.02)
SHIFT_ADD_5 = _shift_workload(0.05)
