"""`gpukit fleet outliers`: every flagged figure of every GPU in the fleet, worst first, with the distance from the
fleet median in MADs and what NVML read while the figure was measured (clocks, power, temperature, throttling)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpukit.fleet.status import FleetStatus

__all__ = ["Outlier", "describe_telemetry", "find_outliers"]


@dataclass(frozen=True)
class Outlier:
    """One flagged figure of one GPU: a slow one (flags from the slow rule) or one whose check failed."""

    node: str
    gpu: int
    uuid: str | None
    model: str
    figure: str
    unit: str
    value: float | None  # None for a failed figure
    fleet_median: float | None
    vs_fleet: float | None  # value / fleet median
    fleet_mads: float | None  # signed, raw MADs
    node_median: float | None
    vs_node: float | None
    reference: float | None
    vs_reference: float | None
    flags: list[str]
    telemetry: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None  # a failed check's reason

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _sort_key(o: Outlier) -> tuple[int, float, str, int]:
    # failed checks first, then the slowest against the fleet (or the node where there is no fleet figure)
    ratio = o.vs_fleet if o.vs_fleet is not None else (o.vs_node if o.vs_node is not None else 1.0)
    return (0 if "failed" in o.flags else 1, ratio, o.node, o.gpu)


def find_outliers(status: FleetStatus) -> list[Outlier]:
    """The flagged cells of ``status`` as outliers, failed checks first, then the slowest first."""
    out = []
    for row in status.rows:
        for cell in row.cells.values():
            if not cell.flags:
                continue
            j = cell.judgement
            fleet = j.fleet if j else None
            peers = j.peers if j else None
            ref = j.reference if j else None
            out.append(
                Outlier(
                    node=row.node,
                    gpu=row.gpu,
                    uuid=row.uuid,
                    model=row.model,
                    figure=cell.figure,
                    unit=cell.unit,
                    value=cell.value,
                    fleet_median=fleet.median if fleet else None,
                    vs_fleet=cell.vs_fleet,
                    fleet_mads=cell.fleet_mads,
                    node_median=peers.median if peers else None,
                    vs_node=peers.ratio if peers else None,
                    reference=ref.median if ref else None,
                    vs_reference=ref.ratio if ref else None,
                    flags=list(cell.flags),
                    telemetry=dict(cell.telemetry),
                    reason=cell.reason,
                )
            )
    return sorted(out, key=_sort_key)


def describe_telemetry(t: dict[str, Any]) -> str:
    """What NVML read while a figure was measured, in a few words: "SM 1755 MHz, 690 W, 72 °C, throttle: …"."""
    parts = []
    for key, fmt in (("sm_clock_mhz", "SM {:.0f} MHz"), ("mem_clock_mhz", "mem {:.0f} MHz"),
                     ("power_w", "{:.0f} W"), ("temp_c", "{:.0f} °C")):  # fmt: skip
        if isinstance(t.get(key), int | float):
            parts.append(fmt.format(t[key]))
    reasons = t.get("throttle_reasons")
    if reasons:
        parts.append("throttle: " + ", ".join(str(r) for r in reasons))
    elif reasons is not None:
        parts.append("no throttling")
    return ", ".join(parts) or "no telemetry"
