"""The acceptance document: what `gpukit accept --json` prints, the history stores and `gpukit fleet` reads.

Pure data (dataclasses with units in field names, ``to_dict`` / ``from_dict``); the schema is the one in
``docs/fleet.md``. Figure names, units and directions are defined once here, in :data:`FIGURES`; consumers treat
figure names generically and take unit and direction from each saved figure, so a record written by a newer gpukit
with a figure this one does not know still reads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from functools import cache
from typing import Any

__all__ = [
    "CPU_FIGURES",
    "CUDA_FIGURES",
    "FIGURES",
    "KIND",
    "VERDICTS",
    "VERSION",
    "Acceptance",
    "Figure",
    "FigureSpec",
    "GpuAcceptance",
    "Soak",
    "SoakPoint",
    "worst_verdict",
]

KIND = "gpukit-accept"
VERSION = 1
VERDICTS = ("ok", "slow", "faulty")  # in order of severity


@dataclass(frozen=True)
class FigureSpec:
    """One acceptance figure: its name, unit (as printed), direction and what it measures."""

    name: str
    unit: str
    higher_is_better: bool
    description: str
    dcgm: str | None = None  # which DCGM level-3 gate judges the same quantity ("compute", "bandwidth"), if any


CUDA_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("gemm_bf16_tflops", "TFLOP/s", True, "bf16 GEMM 8192³ through cuBLAS", "compute"),
    FigureSpec("gemm_fp8_tflops", "TFLOP/s", True, "fp8 (e4m3) GEMM 8192³ through cuBLASLt", "compute"),
    FigureSpec("hbm_copy_gbps", "GB/s", True, "device-to-device copy, 1 GiB, bytes read + written", "bandwidth"),
    FigureSpec("hbm_triad_gbps", "GB/s", True, "triad a = b + s·c, 3 × 1 GiB streams, bytes read + written", None),
    FigureSpec("h2d_pinned_gbps", "GB/s", True, "pinned host → device copy, 1 GiB", None),
    FigureSpec("d2h_pinned_gbps", "GB/s", True, "device → pinned host copy, 1 GiB", None),
    FigureSpec("soak_gemm_tflops", "TFLOP/s", True, "sustained bf16 GEMM over the soak: median per-second rate", None),
)
CPU_FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("gemm_fp32_tflops", "TFLOP/s", True, "fp32 GEMM on the CPU through torch", None),
    FigureSpec("mem_copy_gbps", "GB/s", True, "host memory copy, bytes read + written", None),
    FigureSpec("mem_triad_gbps", "GB/s", True, "triad a = b + s·c in host memory, bytes read + written", None),
    FigureSpec("soak_gemm_tflops", "TFLOP/s", True, "sustained fp32 GEMM over the soak: median per-second rate", None),
)
FIGURES: dict[str, FigureSpec] = {spec.name: spec for spec in (*CUDA_FIGURES, *CPU_FIGURES)}


def worst_verdict(verdicts: list[str]) -> str:
    """The most severe of ``verdicts`` ("ok" when empty); an unknown verdict counts as "faulty"."""
    rank = [VERDICTS.index(v) if v in VERDICTS else len(VERDICTS) - 1 for v in verdicts]
    return VERDICTS[max(rank, default=0)]


@cache
def _field_names(cls: type) -> frozenset[str]:
    # once per class: `fleet status` reads 64 nodes × 8 GPUs × 7 figures, and dataclasses.fields() costs
    return frozenset(f.name for f in fields(cls))


def _pick(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = _field_names(cls)
    return {k: v for k, v in data.items() if k in names}


@dataclass
class Figure:
    """One measured figure of one GPU, with every comparison it was judged by.

    ``value`` is None unless ``status`` is "ok" (a figure that failed its check is a failure, never a number);
    ``rel_error`` is the correctness check's relative error; ``spread`` the run's (max − min) / median over its
    samples. ``vs_*`` are value / that median (or reference); ``fleet_mads`` the signed distance from the fleet
    median in MADs; ``dcgm_gate`` what DCGM's level-3 diagnostic would demand of the same quantity (None where DCGM
    has no gate for it or no figure for this GPU model).
    """

    value: float | None
    unit: str
    higher_is_better: bool = True
    status: str = "ok"  # ok | failed | skipped
    reason: str | None = None
    rel_error: float | None = None
    spread: float | None = None
    reference: float | None = None
    vs_reference: float | None = None
    node_median: float | None = None
    vs_node: float | None = None
    fleet_median: float | None = None
    fleet_mad: float | None = None
    vs_fleet: float | None = None
    fleet_mads: float | None = None
    dcgm_gate: float | None = None
    dcgm_note: str | None = None  # what that DCGM gate measures (an fp32 SGEMM rate beside a bf16 figure), or why none
    flags: list[str] = field(default_factory=list)
    telemetry: dict[str, Any] = field(default_factory=dict)  # what NVML read while it ran: clocks, power, throttle

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Figure:
        return cls(**_pick(cls, data))


@dataclass
class SoakPoint:
    """One second of the soak: the GEMM rate reached in it and what NVML read at that moment."""

    t_s: float
    tflops: float
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    throttle_reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SoakPoint:
        return cls(**_pick(cls, data))


@dataclass
class Soak:
    """The sustained GEMM: its per-second trace, the sag (1 − worst second / median of the first seconds) and the
    flags raised on it (``sag`` with the throttle reason seen at that moment)."""

    duration_s: float
    trace: list[SoakPoint] = field(default_factory=list)
    sag: float | None = None
    flags: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | failed | skipped
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["trace"] = [p.to_dict() for p in self.trace]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Soak:
        picked = _pick(cls, data)
        picked["trace"] = [SoakPoint.from_dict(p) for p in data.get("trace") or []]
        return cls(**picked)


@dataclass
class GpuAcceptance:
    """One GPU's acceptance (or the CPU's, with ``--device cpu``: index 0, model = the CPU)."""

    index: int
    uuid: str | None
    model: str
    serial: str | None = None
    figures: dict[str, Figure] = field(default_factory=dict)
    soak: Soak | None = None
    telemetry: dict[str, Any] = field(default_factory=dict)  # {"before": {...}, "after": {...}, "samples": [...]}
    verdict: str = "ok"
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "serial": self.serial,
            "model": self.model,
            "figures": {name: f.to_dict() for name, f in self.figures.items()},
            "soak": self.soak.to_dict() if self.soak else None,
            "telemetry": self.telemetry,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuAcceptance:
        picked = _pick(cls, data)
        picked["figures"] = {k: Figure.from_dict(v) for k, v in (data.get("figures") or {}).items()}
        picked["soak"] = Soak.from_dict(data["soak"]) if data.get("soak") else None
        return cls(**picked)


@dataclass
class Acceptance:
    """One `gpukit accept` run on one node: every GPU, the node-wide checks and the node's verdict."""

    started_at: str  # ISO 8601 UTC, "…Z"
    node: dict[str, Any]  # gpukit.hardware.identity.node_identity()
    device: str  # cuda | cpu
    settings: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, Any] | None = None  # {"model", "source", "date"} of the shipped reference used
    gpus: list[GpuAcceptance] = field(default_factory=list)
    node_checks: dict[str, Any] = field(default_factory=lambda: {"p2p": None, "allreduce": None})
    verdict: str = "ok"
    reasons: list[str] = field(default_factory=list)
    duration_s: float | None = None
    kind: str = KIND
    version: int = VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "version": self.version,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "node": self.node,
            "device": self.device,
            "settings": self.settings,
            "reference": self.reference,
            "gpus": [g.to_dict() for g in self.gpus],
            "node_checks": self.node_checks,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Acceptance:
        """Read a saved document; ValueError when it is not an acceptance (another kind or a newer version)."""
        if data.get("kind") != KIND:
            raise ValueError(f"not a gpukit acceptance record (kind {data.get('kind')!r})")
        if int(data.get("version", 0)) > VERSION:
            raise ValueError(f"acceptance record version {data.get('version')} is newer than this gpukit's {VERSION}")
        picked = _pick(cls, data)
        picked["gpus"] = [GpuAcceptance.from_dict(g) for g in data.get("gpus") or []]
        return cls(**picked)
