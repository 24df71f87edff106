"""Communication time of a multi-GPU plan: DDP's gradient all-reduce, ZeRO / FSDP all-gathers and reduce-scatters,
tensor parallelism's all-reduces — from the all-reduce busbw measured on this GPU (`gpukit bench allreduce`, read
from the results history) when there is one, else a sourced datasheet figure, labelled.

One collective of S bytes over n ranks takes ``S × factor(n) / busbw`` (NCCL's convention: busbw = algbw × factor,
factor 2(n−1)/n for all-reduce, (n−1)/n for all-gather and reduce-scatter). Measured busbw depends on the message
size, so each term uses the busbw measured at its own message size (interpolated on log size; the nearest end
outside the measured range). Terms per training step, with W the bytes of this GPU's (TP-shard of the) weights and
gradients in the recipe's dtype, L layers:
- ddp: all-reduce W over the dp ranks, in DDP's 25 MiB buckets;
- zero1 / zero2: reduce-scatter of W (gradients) and all-gather of W (updated weights), 25 MiB messages;
- zero3 / fsdp: per layer, all-gather W/L in the forward and again in the backward, reduce-scatter W/L;
- tp: per layer, 2 all-reduces of the activations (b·s·h × 2 bytes in bf16, 4 in fp32) in the forward and 2 in
  the backward (+2 with checkpointing's recomputed forward), over the tp ranks (Megatron-LM, no sequence parallel).
Data-parallel collectives can overlap the backward pass, TP's cannot: the step is reported both ways — no overlap
(compute + all communication, an upper bound) and full overlap (max(compute, DP communication) + TP).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpukit.hardware.specs import GpuSpec, match_spec
from gpukit.plan.memory import MemoryBreakdown, PlanSettings, _state_bytes
from gpukit.plan.models import ModelSpec, TransformerSpec

__all__ = ["BUSBW_FACTORS", "BusbwCurve", "CommEstimate", "CommTerm", "collective_s", "estimate_comm", "load_busbw"]

# NCCL's busbw factors (the same as bench/collectives/ops.py; a test keeps the two equal)
_COLLECTIVE_OPS = ("allreduce",)  # the workload name a collectives run stores its all-reduce rows under

BUSBW_FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
}
DDP_BUCKET_BYTES = 25 * 2**20  # torch DDP's default bucket_cap_mb


@dataclass(frozen=True)
class BusbwCurve:
    """All-reduce busbw against message size: measured points, or one flat datasheet figure."""

    points: tuple[tuple[int, float], ...]  # (size_bytes, busbw GB/s), sorted by size
    source: str  # "measured …" | "datasheet …"

    def at(self, size_bytes: float) -> float:
        pts = self.points
        if len(pts) == 1 or size_bytes <= pts[0][0]:
            return pts[0][1]
        if size_bytes >= pts[-1][0]:
            return pts[-1][1]
        for (s0, b0), (s1, b1) in itertools.pairwise(pts):
            if s0 <= size_bytes <= s1:
                f = (math.log(size_bytes) - math.log(s0)) / (math.log(s1) - math.log(s0))
                return b0 + f * (b1 - b0)
        return pts[-1][1]  # pragma: no cover - the loop always returns


@dataclass(frozen=True)
class CommTerm:
    what: str
    op: str
    ranks: int
    bytes_per_call: float
    calls: int
    busbw_gbps: float
    seconds: float
    overlaps_compute: bool


@dataclass(frozen=True)
class CommEstimate:
    terms: tuple[CommTerm, ...]
    busbw_source: str
    compute_step_s: float | None
    comm_s: float
    step_no_overlap_s: float | None
    step_overlap_s: float | None
    comm_fraction: float | None  # of the no-overlap step
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """Plan notes: the communication term, said in words."""
        if not self.terms:
            return list(self.notes)
        parts = ", ".join(f"{t.what} {t.seconds * 1e3:.3g} ms" for t in self.terms)
        out = [f"communication per step ≈ {self.comm_s * 1e3:.3g} ms ({parts}); busbw: {self.busbw_source}"]
        if self.comm_fraction is not None and self.step_no_overlap_s and self.step_overlap_s:
            out.append(f"step with communication: {self.step_no_overlap_s * 1e3:.3g} ms without overlap "
                       f"({self.comm_fraction:.0%} of it communication), {self.step_overlap_s * 1e3:.3g} ms if the "
                       "data-parallel collectives fully overlap the backward")  # fmt: skip
        return out + list(self.notes)


def collective_s(op: str, nbytes: float, ranks: int, busbw_gbps: float) -> float:
    """Seconds for one collective: S × factor(n) / busbw (0 on one rank)."""
    if ranks <= 1:
        return 0.0
    return nbytes * BUSBW_FACTORS[op](ranks) / (busbw_gbps * 1e9)


# ---- busbw: measured, else datasheet -------------------------------------------------------------------------


def load_busbw(spec: GpuSpec, db_path: str | Path | None = None) -> BusbwCurve | None:
    """The latest measured all-reduce curve on a GPU of ``spec``'s kind (≥ 2 ranks, checked rows), or None.
    Read through the results history (the typed all-reduce rows of a collectives run: ``results[].multi``); a
    missing or damaged history is no measurement (the datasheet figure is used instead), never an error of `plan`."""
    from gpukit.errors import GpukitError
    from gpukit.history import open_history

    try:
        with open_history(db_path, create=False) as history:
            for summary in history.list_runs(limit=200):
                if not any(w in _COLLECTIVE_OPS for w in summary.workloads):
                    continue
                doc = history.load_run(summary.id)
                curve = _curve(spec, summary.hostname, doc["machine"], doc.get("results") or [])
                if curve is not None:
                    return curve
    except (GpukitError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return None


def _usable(r: dict[str, Any]) -> bool:
    """A checked all-reduce row on GPUs with ≥ 2 ranks (one rank's busbw is 0 by definition)."""
    return bool(r.get("op") == "allreduce" and r.get("status") == "ok" and r.get("check") and r.get("device") == "cuda"
                and (r.get("ranks") or 0) >= 2 and r.get("busbw_gbps"))  # fmt: skip


def _curve(spec: GpuSpec, host: str | None, machine: dict[str, Any], results: list[Any]) -> BusbwCurve | None:
    multi = [r.get("multi") for r in results if isinstance(r, dict)]
    names = machine.get("gpus") or machine.get("gpu_names") or []
    local = match_spec(str(names[0])) if names else None
    if local is None or local.key != spec.key:
        return None
    rows = [r for r in multi if isinstance(r, dict) and r.get("kind") == "collective" and _usable(r)]
    if not rows:
        return None
    ranks = max(r["ranks"] for r in rows)
    best: dict[int, float] = {}  # per size, the better of per-call and captured (what a tuned loop gets)
    for r in rows:
        if r["ranks"] == ranks:
            best[int(r["size_bytes"])] = max(best.get(int(r["size_bytes"]), 0.0), float(r["busbw_gbps"]))
    return BusbwCurve(tuple(sorted(best.items())), f"measured on {host or 'this machine'}, {ranks} × {names[0]}")


def datasheet_busbw(spec: GpuSpec) -> BusbwCurve | None:
    if spec.allreduce_busbw_gbps:
        return BusbwCurve(((1, float(spec.allreduce_busbw_gbps)),), f"datasheet: {spec.allreduce_busbw_source}")
    if spec.interconnect_gbps:
        return BusbwCurve(((1, float(spec.interconnect_gbps)),),
                          f"datasheet: {spec.interconnect} {spec.interconnect_gbps:g} GB/s one way per GPU "
                          "(the link's speed, an upper bound of busbw)")  # fmt: skip
    return None


# ---- the terms ---------------------------------------------------------------------------------------------------


def _term(what: str, op: str, ranks: int, per_call: float, calls: int, curve: BusbwCurve, dp: bool) -> CommTerm:
    bw = curve.at(per_call)
    return CommTerm(what, op, ranks, per_call, calls, bw, calls * collective_s(op, per_call, ranks, bw), dp)


def _bucketed(what: str, op: str, ranks: int, total: float, curve: BusbwCurve) -> CommTerm:
    calls = max(1, math.ceil(total / DDP_BUCKET_BYTES))
    return _term(what, op, ranks, total / calls, calls, curve, True)


def train_terms(model: ModelSpec, s: PlanSettings, curve: BusbwCurve) -> list[CommTerm]:
    weights, grads, *_ = _state_bytes(model, s)
    w, g = weights / s.tp, grads / s.tp
    dp, terms = s.dp, []
    if dp > 1 and s.shard == "ddp":
        terms.append(_bucketed("DDP gradient all-reduce", "allreduce", dp, g, curve))
    elif dp > 1 and s.shard in ("zero1", "zero2"):
        terms.append(_bucketed(f"{s.shard} gradient reduce-scatter", "reducescatter", dp, g, curve))
        terms.append(_bucketed(f"{s.shard} weight all-gather", "allgather", dp, w, curve))
    elif dp > 1:
        layers = model.num_layers if isinstance(model, TransformerSpec) else 1
        terms.append(_term(f"{s.shard} weight all-gather (fwd + bwd)", "allgather", dp, w / layers, 2 * layers,
                           curve, True))  # fmt: skip
        terms.append(_term(f"{s.shard} gradient reduce-scatter", "reducescatter", dp, g / layers, layers, curve, True))
    if s.tp > 1 and isinstance(model, TransformerSpec):
        act = (4.0 if s.recipe == "fp32" else 2.0) * s.batch * s.seq * model.hidden_size
        calls = model.num_layers * (6 if s.checkpointing else 4)
        terms.append(_term("TP activation all-reduces", "allreduce", s.tp, act, calls, curve, False))
    return terms


def infer_terms(model: ModelSpec, s: PlanSettings, curve: BusbwCurve) -> list[CommTerm]:
    """Per decoded token under TP: 2 all-reduces per layer of batch × h × 2 bytes (latency-bound messages)."""
    if s.tp <= 1 or not isinstance(model, TransformerSpec):
        return []
    return [_term("TP all-reduces per decoded token", "allreduce", s.tp, 2.0 * s.batch * model.hidden_size,
                  2 * model.num_layers, curve, False)]  # fmt: skip


def estimate_comm(
    model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, time: Any, spec: GpuSpec, db_path: str | Path | None = None
) -> CommEstimate | None:
    """The communication term for a plan on ``spec`` GPUs (None for one GPU). ``time`` is the TimeEstimate."""
    del mem  # the terms need the unsharded state bytes, which memory's breakdown has already divided
    if s.gpus <= 1:
        return None
    curve = load_busbw(spec, db_path) or datasheet_busbw(spec)
    if curve is None:
        return CommEstimate((), "none", None, 0.0, None, None, None,
                            (f"communication time: n/a — no measured busbw for {spec.name} in the history and no "
                             "datasheet figure; run gpukit bench allreduce on it",))  # fmt: skip
    terms = train_terms(model, s, curve) if s.task == "train" else infer_terms(model, s, curve)
    comm = sum(t.seconds for t in terms)
    base = None if time is None else time.step_s if s.task == "train" else time.per_token_s  # None: nothing fits
    if base is None:
        return CommEstimate(tuple(terms), curve.source, None, comm, None, None, None)
    dp_s = sum(t.seconds for t in terms if t.overlaps_compute)
    no_overlap = base + comm
    overlap = max(base, dp_s) + (comm - dp_s)
    notes = () if s.task == "train" else ("per decoded token (prefill's all-reduces are not included)",)
    return CommEstimate(tuple(terms), curve.source, base, comm, no_overlap, overlap,
                        comm / no_overlap if no_overlap else None, notes)  # fmt: skip
