"""What a GPU model's figures are judged against besides its peers: the reference gpukit ships for the model, and
what DCGM's level-3 diagnostic would demand of the same quantity (printed beside each figure, never judged by).

A reference (``fleet/data/reference_*.json``) is figures measured by `gpukit accept` itself on that model — never a
datasheet × guess — with the run-to-run spread of each figure over the runs it came from, its source (the
``benchmarks/`` file) and date. A model without one is judged against its peers and the fleet only, and says so.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from gpukit.fleet.record import FIGURES

__all__ = ["DcgmGate", "Reference", "dcgm_gate", "dcgm_gates", "reference_for", "references"]


@dataclass(frozen=True)
class Reference:
    """Figures measured by gpukit on one GPU model: ``figures[name] = {"value", "unit", "spread", ...}``."""

    model: str
    source: str
    date: str
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    stack: dict[str, Any] = field(default_factory=dict)
    runs: int | None = None

    def value(self, name: str) -> float | None:
        v = (self.figures.get(name) or {}).get("value")
        return float(v) if isinstance(v, int | float) else None

    def spread(self, name: str) -> float | None:
        """The figure's run-to-run spread (max/min − 1 over ``runs`` runs), or None."""
        v = (self.figures.get(name) or {}).get("spread")
        return float(v) if isinstance(v, int | float) else None

    def sigma(self, name: str) -> float | None:
        """The figure's relative noise σ from its spread over the runs it was measured in (``fleet.stats``)."""
        from gpukit.fleet.stats import sigma_from_spread

        spread = self.spread(name)
        runs = (self.figures.get(name) or {}).get("runs") or self.runs
        if spread is None or not isinstance(runs, int) or runs < 2:
            return None
        return sigma_from_spread(spread, runs)

    def header(self) -> dict[str, Any]:
        """What the acceptance document records of it (``record.Acceptance.reference``)."""
        return {"model": self.model, "source": self.source, "date": self.date, "runs": self.runs}


@cache
def references() -> tuple[Reference, ...]:
    """Every reference shipped in ``gpukit/fleet/data/reference_*.json``."""
    out = []
    for entry in sorted(resources.files("gpukit.fleet").joinpath("data").iterdir(), key=lambda e: e.name):
        if entry.name.startswith("reference_") and entry.name.endswith(".json"):
            doc = json.loads(entry.read_text(encoding="utf-8"))
            out.append(Reference(model=doc["model"], source=doc["source"], date=doc["date"],
                                 figures=doc.get("figures", {}), stack=doc.get("stack", {}),
                                 runs=doc.get("runs")))  # fmt: skip
    return tuple(out)


def reference_for(model: str) -> Reference | None:
    """The reference for the GPU model NVML names ``model`` (exact, case-insensitive: an "NVIDIA H200 NVL" is
    not an "NVIDIA H200"), or None."""
    want = model.strip().lower()
    return next((r for r in references() if r.model.lower() == want), None)


@dataclass(frozen=True)
class DcgmGate:
    """DCGM's level-3 thresholds for one model (see ``data/dcgm_gates.toml`` for where each comes from)."""

    model: str
    compute_tflops: float | None
    bandwidth_gbps: float | None
    pcie_min_generation: int | None
    pcie_min_width: int | None
    source: str
    bandwidth_note: str | None = None


@cache
def dcgm_gates() -> tuple[DcgmGate, ...]:
    text = resources.files("gpukit.fleet").joinpath("data/dcgm_gates.toml").read_text(encoding="utf-8")
    doc = tomllib.loads(text)
    return tuple(_gate(s, doc["source"]) for s in doc.get("sku", []))


def _gate(s: dict[str, Any], source: str) -> DcgmGate:
    return DcgmGate(
        model=s["model"],
        compute_tflops=s.get("compute_tflops"),
        bandwidth_gbps=s.get("bandwidth_gbps"),
        pcie_min_generation=s.get("pcie_min_generation"),
        pcie_min_width=s.get("pcie_min_width"),
        source=source,
        bandwidth_note=s.get("bandwidth_note"),
    )


def dcgm_gate(model: str, figure: str) -> tuple[float | None, str | None]:
    """(what DCGM level 3 would demand of ``figure`` in its unit, a note saying what that gate measures), or
    (None, why not) for a figure DCGM has no gate for."""
    spec = FIGURES.get(figure)
    gate = next((g for g in dcgm_gates() if g.model.lower() == model.strip().lower()), None)
    if spec is None or gate is None:
        return None, "DCGM has no entry for this GPU model here" if spec is not None else None
    if figure.startswith(("gemm_", "soak_")) and gate.compute_tflops is not None:
        return gate.compute_tflops, "DCGM targeted_stress: SGEMM (fp32 CUDA cores) ≥ this, 0.75 × NVIDIA's figure"
    if figure in ("hbm_copy_gbps", "hbm_triad_gbps") and gate.bandwidth_gbps is not None:
        note = "DCGM memory_bandwidth minimum, 0.75 × NVIDIA's figure"
        return gate.bandwidth_gbps, f"{note} ({gate.bandwidth_note})" if gate.bandwidth_note else note
    if figure in ("h2d_pinned_gbps", "d2h_pinned_gbps") and gate.pcie_min_generation is not None:
        return None, f"DCGM pcie: link Gen ≥ {gate.pcie_min_generation} x{gate.pcie_min_width}, no bandwidth floor"
    return None, "DCGM level 3 has no gate for this figure"
