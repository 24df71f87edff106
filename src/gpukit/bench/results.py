"""Result dataclasses of the measuring engine: pure data, units in field names, ``to_dict()`` for JSON and SQLite.

A :class:`Result` is one row of `gpukit bench` (one workload × implementation × size). Its JSON form is the public
contract documented in ``docs/bench-json.md``: the throughput appears under the key of its unit (``gbps``,
``giter_per_s``, ``tflops`` or ``samples_per_s``) and every time is in seconds. A row whose ``status`` is not ``ok``
carries a ``reason`` and no times — a result that fails its check is a failure, never a time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpukit.bench.collectives.results import MultiRow
    from gpukit.bench.request import BenchRequest

__all__ = ["THROUGHPUT_UNITS", "Ceilings", "Result", "Run", "legacy_size", "run_from_saved"]

# unit key → (scale of the base quantity per unit, label shown in tables)
THROUGHPUT_UNITS: dict[str, tuple[float, str]] = {
    "gbps": (1e9, "GB/s"),
    "giter_per_s": (1e9, "Giter/s"),
    "tflops": (1e12, "TFLOP/s"),
    "samples_per_s": (1.0, "samples/s"),
}


@dataclass
class Result:
    """One measured (or skipped / failed) row.

    ``backend`` is the implementation's name as shown in the table (``cupy-cuda-c``, ``cupy-cuda-c-naive``, ``numpy``);
    ``device`` is ``cpu`` or ``cuda``. ``size`` is the size label (``1GiB``, ``1536x1024x20``). ``kernel_*`` are per
    call of device time; ``launch_s`` is the host's time to issue one call (GPU rows timed with events); ``call_s``,
    the larger of the two, is what a loop calling it from Python gets per call, and the throughput, ``speedup`` and
    ``end_to_end_s`` (= h2d + call_s + d2h) are computed from it. ``speedup`` compares call_s with the best CPU
    result for the same workload and size; ``speedup_e2e`` uses end-to-end times on both sides.
    """

    workload: str
    backend: str
    device: str
    size: str
    status: str = "ok"  # ok | skipped | failed
    reason: str | None = None
    hint: str | None = None
    # why a row was not measured, as a word: "unavailable" (its backend cannot run here), "unsupported" (not at this
    # size or dtype), "estimate" (estimated past the budget), "sweep-budget" (the sweep's time ran out), "quick"
    # (--quick leaves pure Python out); None else
    skip_cause: str | None = None
    estimate_s: float | None = None  # the implementation's estimate of one call, made before measuring (skips use it)
    dtype: str | None = None
    check: bool | None = None
    error: float | None = None
    tolerance: float | None = None
    compile_s: float | None = None
    h2d_s: float | None = None
    kernel_median_s: float | None = None
    kernel_min_s: float | None = None
    kernel_max_s: float | None = None
    launch_s: float | None = None  # GPU rows: host seconds to issue one call; above the kernel time: launch-bound
    d2h_s: float | None = None
    end_to_end_s: float | None = None
    throughput_unit: str | None = None
    gbps: float | None = None
    giter_per_s: float | None = None
    tflops: float | None = None
    samples_per_s: float | None = None
    ceiling: str | None = None  # which measured ceiling pct_of_ceiling is against (e.g. "d2d_copy_gbps")
    pct_of_ceiling: float | None = None
    speedup: float | None = None
    speedup_e2e: float | None = None
    flops: float | None = None
    bytes: float | None = None
    repeats: int = 0
    inner: int = 1
    samples_s: list[float] = field(default_factory=list)
    energy_j: float | None = None
    telemetry: dict[str, Any] | None = None  # GPU clocks, power, temperature, throttle reasons (before/after)
    output_preview: list[Any] | None = None  # the whole output when it is tiny (≤ 16 elements), e.g. --seed-example
    size_x: float | None = None  # the size's magnitude on its axis (Size.magnitude): sweeps and reports read it
    size_group: str | None = None  # the variant sizes are compared within (Size.group: the dtype, or "")
    working_set_bytes: float | None = None  # what the timed calls cycled through: could a cache hold it?
    ceiling_note: str | None = None  # why a figure above 100 % of its ceiling is not a puzzle
    # Noise-based stopping: what ended sampling (noise: the spread reached the target; time: the row's sampling
    # time ended first; count: a fixed number of samples), the robust spread MAD / median of the kept samples, the
    # target it was held to, and whether it got there (False: the row never settled).
    stopped_by: str | None = None
    rel_mad: float | None = None
    noise_target: float | None = None
    settled: bool | None = None
    cache: str | None = None  # hot | cold: the cache state each sample started in (bench/conditions.py)
    cache_note: str | None = None  # why a row asked to be cold was measured hot
    discarded: dict[str, int] = field(default_factory=dict)  # samples thrown away (throttled GPU), by reason
    # A multi-GPU row (all-reduce, p2p, DDP scaling): the typed row it was measured as (bench/collectives/results.py),
    # stored with its "kind"; None for every other bench row
    multi: MultiRow | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def call_s(self) -> float | None:
        """Seconds per call when called back to back from Python: the device time, or the host's launch when that is
        slower. Throughput, speedup, crossovers and end to end are computed from it; ``kernel_*`` stay device time."""
        if self.kernel_median_s is None:
            return None
        return max(self.kernel_median_s, self.launch_s or 0.0)

    @property
    def launch_bound(self) -> bool:
        """Issuing a call from the host took longer than the device took to run it."""
        return bool(self.ok and self.launch_s and self.kernel_median_s and self.launch_s > self.kernel_median_s)

    @property
    def throughput(self) -> float | None:
        """The throughput in its own unit (``throughput_unit``), or None."""
        return getattr(self, self.throughput_unit) if self.throughput_unit else None

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["multi"] = self.multi.to_dict() if self.multi is not None else None
        return doc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        names = {f.name for f in fields(cls)}
        row = cls(**{k: v for k, v in data.items() if k in names and k != "multi"})
        if isinstance(data.get("multi"), dict):
            from gpukit.bench.collectives.results import row_from_dict

            row.multi = row_from_dict(data["multi"])
        if "size_x" not in data and "size_group" not in data:  # saved before sizes carried them: read the label once
            row.size_x, row.size_group = legacy_size(row.size)
        return row


def legacy_size(label: str) -> tuple[float | None, str]:
    """A label's magnitude and group, for rows saved before results carried them (see ``Size.from_label``)."""
    from gpukit.bench.workloads.base import label_magnitude

    return label_magnitude(label)


@dataclass
class Ceilings:
    """Ceilings measured in this run (None when not measured or not measurable here), with datasheet peaks beside
    them, labelled ``spec_*``. Bandwidths count bytes read plus written for copies within one memory."""

    d2d_copy_gbps: float | None = None
    h2d_pinned_gbps: float | None = None
    d2h_pinned_gbps: float | None = None
    h2d_pageable_gbps: float | None = None
    d2h_pageable_gbps: float | None = None
    cpu_mem_gbps: float | None = None
    cpu_threads: int | None = None
    gpu_name: str | None = None
    spec_name: str | None = None
    spec_bandwidth_gbps: float | None = None
    spec_fp32_tflops: float | None = None
    spec_tflops: dict[str, float] = field(default_factory=dict)  # datasheet dense TFLOP/s per dtype
    measured_at: dict[str, str] = field(default_factory=dict)  # ceiling field → the size it was measured at
    measured_x: dict[str, float] = field(default_factory=dict)  # ceiling field → that size's magnitude (bytes)
    notes: list[str] = field(default_factory=list)

    def for_device(self, device: str, kind: str) -> tuple[str, float] | None:
        """The measured ceiling a ``kind`` ("memory") workload on ``device`` is compared against, or None."""
        if kind != "memory":
            return None
        name = "d2d_copy_gbps" if device == "cuda" else "cpu_mem_gbps"
        value = getattr(self, name)
        return (name, value) if value else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Run:
    """One `gpukit bench` invocation: where, with what, how, and every row."""

    started_at: str  # ISO 8601 UTC
    machine: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    ceilings: Ceilings = field(default_factory=Ceilings)
    results: list[Result] = field(default_factory=list)
    duration_s: float | None = None
    interrupted: bool = False
    id: int | None = None  # set once saved in the history
    request: BenchRequest | None = field(default=None, repr=False, compare=False)  # typed; settings is its JSON

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "interrupted": self.interrupted,
            "machine": self.machine,
            "versions": self.versions,
            "settings": self.settings,
            "ceilings": self.ceilings.to_dict(),
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        return cls(
            id=data.get("id"),
            started_at=data.get("started_at", ""),
            duration_s=data.get("duration_s"),
            interrupted=bool(data.get("interrupted", False)),
            machine=data.get("machine") or {},
            versions=data.get("versions") or {},
            settings=data.get("settings") or {},
            ceilings=Ceilings.from_dict(data.get("ceilings") or {}),
            results=[Result.from_dict(r) for r in data.get("results", [])],
        )


def run_from_saved(doc: dict[str, Any], where: object) -> Run:
    """A run read back from the history (``where``: its path, for the message); rows that are not results
    (edited or damaged by hand) → ConfigError, never a traceback."""
    from gpukit.errors import ConfigError

    try:
        return Run.from_dict(doc)
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"the results history {where} is damaged: run {doc.get('id')} does not read as a bench run ({exc})",
            hint="pass --db PATH (or set GPUKIT_DB) to use another file (this one is damaged)",
        ) from exc
