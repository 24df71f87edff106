"""Rows of the multi-GPU benches: typed, with units in the field names; ``to_dict()`` is the JSON contract
(docs/multi-gpu.md). A row whose status is not ``ok`` has a ``reason`` and no times."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

__all__ = ["CollectiveRow", "MultiRun", "P2PRow", "ScalingRow"]

R = TypeVar("R", bound="_Row")


class _Row:
    """What every row kind shares: ``ok``, and ``to_dict``/``from_dict`` (unknown keys ignored) as the JSON contract."""

    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # every subclass is a dataclass

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class CollectiveRow(_Row):
    op: str
    size_bytes: int
    dtype: str
    ranks: int
    device: str = "cpu"
    backend: str = "gloo"
    graph: str = "per-call"  # per-call | captured (a CUDA graph of the loop, as nccl-tests -G)
    status: str = "ok"  # ok | failed | skipped | unavailable
    reason: str | None = None
    check: bool | None = None  # exact check of every rank's result (before, during and after the timed calls)
    time_s: dict[str, float] | None = None  # median, min, max seconds per call (each sample: the slowest rank)
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    iters: int = 0  # calls per sample
    repeats: int = 0
    requested_bytes: int | None = None
    samples_s: list[float] = field(default_factory=list)


@dataclass
class P2PRow(_Row):
    src: int | None
    dst: int | None
    mode: str  # one-way | both-ways
    peer_access: str  # on | off (off: staged through pinned host memory, as the driver does without peer access)
    link: str | None = None  # from the hardware topology: NV18, PIX, SYS, …
    status: str = "ok"
    reason: str | None = None
    check: bool | None = None
    size_bytes: int = 0
    time_s: dict[str, float] | None = None
    gbps: float | None = None  # bytes moved (both directions for both-ways) / time
    latency_us: float | None = None  # one small copy, median


@dataclass
class ScalingRow(_Row):
    model: str
    ranks: int
    device: str
    backend: str | None
    status: str = "ok"
    reason: str | None = None
    check: bool | None = None  # finite loss and identical weights on every rank after training
    batch_per_rank: int = 0
    image_size: int = 0
    steps: int = 0
    step_s: dict[str, float] | None = None  # median, min, max seconds per step (slowest rank)
    images_per_s: float | None = None  # all ranks together, from the median step
    efficiency: float | None = None  # images_per_s / (ranks × images_per_s at 1 rank)


@dataclass
class MultiRun:
    """One `gpukit bench <collective>|p2p|scaling` invocation."""

    kind: str  # collectives | p2p | scaling
    started_at: str
    settings: dict[str, Any] = field(default_factory=dict)
    rows: list[Any] = field(default_factory=list)  # CollectiveRow | P2PRow | ScalingRow
    failure: str | None = None  # which rank died or hung, and why
    duration_s: float | None = None
    id: int | None = None  # set once saved in the history

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "started_at": self.started_at, "duration_s": self.duration_s,
                "settings": self.settings, "failure": self.failure,
                "rows": [r.to_dict() for r in self.rows]}  # fmt: skip
