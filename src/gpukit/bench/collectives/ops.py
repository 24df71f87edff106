"""The collectives gpukit measures: NCCL's bus-bandwidth factors and exact, known per-rank inputs and outputs.

Sizes follow nccl-tests: ``size_bytes`` is the all-reduce / broadcast buffer, the *output* of all-gather, the *input*
of reduce-scatter and each rank's whole buffer of all-to-all. ``algbw = size / time``; ``busbw = algbw × factor``
with factor 2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, and 1 for broadcast
(shared/REFERENCE.md; nccl-tests' PERFORMANCE.md), so that busbw is comparable across rank counts and with the
link's own speed.

Inputs are small integers: rank r holds ``((i + 3r) mod (2m+1)) − m`` at element i, with m chosen so that every
partial sum over the ranks stays within ±127. Every value and every partial sum is then exact in fp32 *and* bf16
(8 significant bits), whatever order a ring or tree adds them in, so the expected output is exact and a result is
checked with ``torch.equal`` — one wrong element is a failed row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPES", "OPS", "OpSpec", "bandwidths", "expected", "get_op", "inputs", "numel_for", "pattern"]

DTYPES = {"fp32": 4, "bf16": 2}  # name → bytes per element
ROOT = 0  # broadcast's source rank


@dataclass(frozen=True)
class OpSpec:
    name: str
    factor: Callable[[int], float]  # busbw / algbw for n ranks
    description: str


OPS: dict[str, OpSpec] = {
    "allreduce": OpSpec("allreduce", lambda n: 2 * (n - 1) / n, "sum of every rank's buffer, on every rank"),
    "allgather": OpSpec("allgather", lambda n: (n - 1) / n, "every rank's chunk, concatenated, on every rank"),
    "reducescatter": OpSpec("reducescatter", lambda n: (n - 1) / n, "chunk r of the sum, on rank r"),
    "broadcast": OpSpec("broadcast", lambda n: 1.0, f"rank {ROOT}'s buffer, on every rank"),
    "alltoall": OpSpec("alltoall", lambda n: (n - 1) / n, "chunk r of rank q's buffer, as chunk q on rank r"),
}


def get_op(name: str) -> OpSpec:
    if name not in OPS:
        raise ConfigError(f"unknown collective '{name}'", hint=f"use one of {', '.join(OPS)}")
    return OPS[name]


def bandwidths(op: str, size_bytes: int, ranks: int, time_s: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (10⁹ bytes/s), NCCL's convention."""
    algbw = size_bytes / time_s / 1e9
    return algbw, algbw * OPS[op].factor(ranks)


def numel_for(size_bytes: int, dtype: str, ranks: int) -> int:
    """Elements of the size's buffer: whole elements, a multiple of ``ranks`` (chunked ops split it evenly)."""
    n = size_bytes // DTYPES[dtype]
    return max(ranks, n - n % ranks)


def _half_range(ranks: int) -> int:
    return max(1, min(8, 127 // ranks))


def pattern(rank: int, ranks: int, start: int, count: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """Rank ``rank``'s input values at elements start … start+count−1 (small exact integers)."""
    import torch

    m = _half_range(ranks)
    i = torch.arange(start, start + count, dtype=torch.int64, device=device)
    return ((i + 3 * rank) % (2 * m + 1) - m).to(dtype)


def inputs(op: str, rank: int, ranks: int, numel: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """The send buffer of ``rank``: all-gather sends one chunk, every other op a whole buffer."""
    if op == "allgather":
        chunk = numel // ranks
        return pattern(rank, ranks, 0, chunk, device, dtype)
    return pattern(rank, ranks, 0, numel, device, dtype)


def _sum_over_ranks(ranks: int, start: int, count: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    import torch

    total = torch.zeros(count, dtype=torch.int64, device=device)
    for q in range(ranks):
        total += pattern(q, ranks, start, count, device, torch.int64)
    return total.to(dtype)


def expected(op: str, rank: int, ranks: int, numel: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """What ``rank`` must hold after ``op``, computed independently of the collective (in int64, then cast)."""
    import torch

    chunk = numel // ranks
    if op == "allreduce":
        return _sum_over_ranks(ranks, 0, numel, device, dtype)
    if op == "allgather":
        return torch.cat([pattern(q, ranks, 0, chunk, device, dtype) for q in range(ranks)])
    if op == "reducescatter":
        return _sum_over_ranks(ranks, rank * chunk, chunk, device, dtype)
    if op == "broadcast":
        return pattern(ROOT, ranks, 0, numel, device, dtype)
    if op == "alltoall":
        return torch.cat([pattern(q, ranks, rank * chunk, chunk, device, dtype) for q in range(ranks)])
    raise ConfigError(f"unknown collective '{op}'")


def output_numel(op: str, numel: int, ranks: int) -> int:
    return numel // ranks if op == "reducescatter" else numel
