"""`gpukit bench allreduce|allgather|reducescatter|broadcast|alltoall`: choose ranks and sizes, say what cannot run
here (an ``unavailable`` row with the reason), launch the ranks (or run as one under torchrun), collect the rows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpukit.bench.collectives.device import device_state
from gpukit.bench.collectives.launch import LaunchResult, launch, run_inline, under_torchrun
from gpukit.bench.collectives.ops import DTYPES, get_op
from gpukit.bench.collectives.results import CollectiveRow, multi_run
from gpukit.bench.workloads._common import bytes_label, parse_elements
from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.bench.results import Run

__all__ = ["CollectiveRequest", "default_sizes", "device_state", "parse_sizes", "run_collectives"]

KiB, MiB, GiB = 2**10, 2**20, 2**30
DEFAULT_TIMEOUT_S = 120.0


def default_sizes(device: str, quick: bool) -> list[int]:
    """1 KiB → 1 GiB doubling on GPUs (nccl-tests' ``-b 1K -e 1G -f 2``); × 4 steps with --quick. gloo on the
    CPU stops at 64 MiB (16 MiB quick): beyond that a CPU run measures memcpy for minutes and says nothing new."""
    top = GiB if device == "cuda" else (16 * MiB if quick else 64 * MiB)
    step = 4 if quick else 2
    sizes, s = [], KiB
    while s <= top:
        sizes.append(s)
        s *= step
    return sizes


def parse_sizes(texts: list[str]) -> list[int]:
    """'1KiB', '64MiB', '1GiB' (bytes of the buffer, nccl-tests' size); ranges are not taken, list them."""
    return [parse_elements(t, 1) for t in texts]


@dataclass(frozen=True)
class CollectiveRequest:
    ops: tuple[str, ...]
    device: str  # cpu | cuda
    ranks: int | None = None  # default: every GPU (cuda) or 2 (cpu)
    sizes: tuple[int, ...] = ()
    dtypes: tuple[str, ...] = ("fp32",)
    quick: bool = False
    repeats: int | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    graph: bool = True  # also the CUDA-graph-captured loop (CUDA only)

    def run(self) -> Run:
        """Measure it (``gpukit.bench.runner.execute`` calls this, as for any request)."""
        return run_collectives(self)


def _validate(req: CollectiveRequest) -> None:
    for op in req.ops:
        get_op(op)
    if req.device not in ("cpu", "cuda"):
        raise ConfigError(f"unknown device '{req.device}'", hint="use --device cpu or --device cuda")
    for d in req.dtypes:
        if d not in DTYPES:
            raise ConfigError(f"unsupported dtype '{d}'", hint=f"use {' or '.join(DTYPES)}")
    if req.ranks is not None and req.ranks < 1:
        raise ConfigError(f"--ranks must be at least 1, not {req.ranks}")
    if req.timeout_s <= 0:
        raise ConfigError(f"--timeout must be positive, not {req.timeout_s:g}")


def _job(req: CollectiveRequest, sizes: list[int]) -> dict[str, Any]:
    return {"kind": "collectives", "device": req.device, "ops": list(req.ops), "dtypes": list(req.dtypes),
            "sizes": sizes, "warmup": 2 if req.quick else 5, "repeats": req.repeats or (5 if req.quick else 20),
            "max_iters": 200 if req.device == "cuda" else 50, "graph": req.graph,
            # a sample lasts ≥ 2 ms on a GPU (well over event resolution) and ≥ 5 ms on the CPU's host clock
            "target_sample_s": 0.002 if req.device == "cuda" else 0.005}  # fmt: skip


def _missing(req: CollectiveRequest, sizes: list[int], ranks: int, have: list[CollectiveRow], status: str,
             reason: str) -> list[CollectiveRow]:  # fmt: skip
    """A row for each (op, dtype, size) that has none: what a failed or impossible run did not measure."""
    done = {(r.op, r.dtype, r.requested_bytes or r.size_bytes) for r in have}
    backend = "nccl" if req.device == "cuda" else "gloo"
    return [
        CollectiveRow(op, size, dtype, ranks, req.device, backend, status=status, reason=reason, requested_bytes=size)
        for op in req.ops
        for dtype in req.dtypes
        for size in sizes
        if (op, dtype, size) not in done
    ]


def run_collectives(req: CollectiveRequest) -> Run:
    """Measure every (op, dtype, size) of ``req``; never raises for a rank that dies or hangs (a failed row)."""
    _validate(req)
    t0 = time.perf_counter()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    sizes = list(req.sizes) or default_sizes(req.device, req.quick)
    gpus, why = device_state(req.device)
    ranks = req.ranks or (gpus if req.device == "cuda" else 2)
    settings = {"ops": list(req.ops), "device": req.device, "ranks": ranks, "sizes": [bytes_label(s) for s in sizes],
                "dtypes": list(req.dtypes), "quick": req.quick, "timeout_s": req.timeout_s}  # fmt: skip
    if why is None and req.device == "cuda" and ranks > gpus and not under_torchrun():
        raise ConfigError(
            f"--ranks {ranks} but this machine has {gpus} GPU(s)",
            hint=f"use --ranks {gpus} or fewer (one rank per GPU), or torchrun for several nodes",
        )
    if why is not None:
        return multi_run(
            "collectives", started, settings, list(_missing(req, sizes, ranks, [], "unavailable", why)), t0
        )
    if under_torchrun():
        import os

        ranks = int(os.environ["WORLD_SIZE"])
        settings.update(ranks=ranks, launcher="torchrun")
        result: LaunchResult = run_inline(_job(req, sizes), req.timeout_s)
    else:
        settings["launcher"] = "gpukit"
        result = launch(_job(req, sizes), ranks, req.timeout_s)
    rows: list[Any] = [CollectiveRow.from_dict(r) for r in result.rows]
    failure = None
    if result.failure is not None:
        failure = result.failure.message()
        rows += _missing(req, sizes, ranks, rows, "failed", failure)
    return multi_run("collectives", started, settings, rows, t0, failure)
