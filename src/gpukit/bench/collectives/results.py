"""Rows of the multi-GPU benches: typed, with units in the field names; ``to_dict()`` is the JSON contract
(docs/multi-gpu.md). A row whose status is not ``ok`` has a ``reason`` and no times.

They are bench results from the start: :func:`multi_run` makes the ordinary :class:`~gpukit.bench.results.Run`
of a multi-GPU bench, one :class:`~gpukit.bench.results.Result` per row (workload = the op, ``p2p`` or
``scaling-<model>``; throughput in ``gbps`` = busbw or copy GB/s, or ``samples_per_s`` = images/s) carrying the
typed row itself as ``Result.multi``. The history stores it as any run (``multi`` under each result, with its
``kind``), and the report's plots and `gpukit plan` read those rows back.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from gpukit.bench.results import Result, Run

__all__ = ["CollectiveRow", "P2PRow", "ScalingRow", "as_result", "multi_doc", "multi_run", "row_from_dict", "rows_of"]

R = TypeVar("R", bound="_Row")


class _Row:
    """What every row kind shares: ``ok``, and ``to_dict``/``from_dict`` (unknown keys ignored) as the JSON contract."""

    status: str
    KIND: ClassVar[str] = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.KIND, **asdict(self)}  # type: ignore[call-overload]  # every subclass is a dataclass

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class CollectiveRow(_Row):
    KIND: ClassVar[str] = "collective"
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
    KIND: ClassVar[str] = "p2p"
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
    KIND: ClassVar[str] = "scaling"
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


MultiRow = CollectiveRow | P2PRow | ScalingRow
_KINDS: dict[str, type[_Row]] = {c.KIND: c for c in (CollectiveRow, P2PRow, ScalingRow)}


def row_from_dict(data: dict[str, Any]) -> MultiRow | None:
    """The typed row of a stored ``multi`` document (None for an unknown kind)."""
    cls = _KINDS.get(str(data.get("kind")))
    return cls.from_dict(data) if cls is not None else None  # type: ignore[return-value]


def as_result(row: MultiRow) -> Result:
    """The bench Result of one multi-GPU row (``unavailable`` becomes ``skipped``, the bench's word for it)."""
    from gpukit.bench.results import Result
    from gpukit.bench.workloads._common import bytes_label

    status = "skipped" if row.status == "unavailable" else row.status
    if isinstance(row, CollectiveRow):
        t = row.time_s or {}
        backend = f"{row.backend}-x{row.ranks}" + ("-graph" if row.graph == "captured" else "")
        size = f"{bytes_label(row.size_bytes)}:{row.dtype}"
        return Result(row.op, backend, row.device, size, status, row.reason, dtype=row.dtype,
                      check=row.check, kernel_median_s=t.get("median"), kernel_min_s=t.get("min"),
                      kernel_max_s=t.get("max"), throughput_unit="gbps", gbps=row.busbw_gbps,
                      bytes=float(row.size_bytes), repeats=row.repeats, inner=row.iters,
                      samples_s=list(row.samples_s), size_x=float(row.size_bytes), size_group=row.dtype,
                      multi=row)  # fmt: skip
    if isinstance(row, P2PRow):
        t = row.time_s or {}
        pair = "n/a" if row.src is None else f"{row.src}->{row.dst}"
        return Result("p2p", f"{pair} {row.mode} peer-{row.peer_access}", "cuda", bytes_label(row.size_bytes or 0),
                      status, row.reason, check=row.check, kernel_median_s=t.get("median"),
                      kernel_min_s=t.get("min"), kernel_max_s=t.get("max"), throughput_unit="gbps", gbps=row.gbps,
                      bytes=float(row.size_bytes), size_x=float(row.size_bytes or 0), size_group="",
                      multi=row)  # fmt: skip
    t = row.step_s or {}
    return Result(f"scaling-{row.model}", f"ddp-x{row.ranks}", row.device, f"{row.image_size}px-b{row.batch_per_rank}",
                  status, row.reason, check=row.check, kernel_median_s=t.get("median"), kernel_min_s=t.get("min"),
                  kernel_max_s=t.get("max"), throughput_unit="samples_per_s", samples_per_s=row.images_per_s,
                  repeats=row.steps, size_x=float(row.ranks), size_group=f"{row.image_size}px-b{row.batch_per_rank}",
                  multi=row)  # fmt: skip


def multi_run(kind: str, started_at: str, settings: dict[str, Any], rows: list[MultiRow], t0: float,
              failure: str | None = None) -> Run:  # fmt: skip
    """The Run of one multi-GPU bench (``kind``: collectives | p2p | scaling; ``t0``: its ``perf_counter`` start):
    machine, versions and hardware state as every run records them, one Result per row."""
    from gpukit.bench.results import Run
    from gpukit.bench.runner import _fingerprint, versions

    machine = _fingerprint()
    machine.setdefault("gpus", list(machine.get("gpu_names") or []))  # the store's "gpu" column reads this
    results = [as_result(r) for r in rows]
    doc = {"workloads": sorted({r.workload for r in results}), "kind": kind, "failure": failure,
           "quick": bool(settings.get("quick")), **settings}  # fmt: skip
    return Run(started_at, machine, versions(), doc, results=results, duration_s=time.perf_counter() - t0)


def rows_of(run: Run) -> list[MultiRow]:
    """The typed multi-GPU rows of a run (none for an ordinary bench run)."""
    return [r.multi for r in run.results if r.multi is not None]


def multi_doc(run: Run) -> dict[str, Any]:
    """The `--json` document of a multi-GPU bench (docs/multi-gpu.md): kind, settings, failure and its rows."""
    settings = {k: v for k, v in run.settings.items() if k not in ("kind", "failure", "workloads")}
    return {"id": run.id, "kind": run.settings.get("kind"), "started_at": run.started_at,
            "duration_s": run.duration_s, "settings": settings, "failure": run.settings.get("failure"),
            "rows": [r.to_dict() for r in rows_of(run)]}  # fmt: skip
