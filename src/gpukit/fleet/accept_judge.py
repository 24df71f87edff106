"""Verdicts of an acceptance run: every figure judged against the shipped reference, the node's other GPUs and the
fleet (``fleet.stats``, the one copy of the slow rule), then a verdict per GPU and per node.

- **faulty**: a figure failed its check or could not be measured for an error (CUDA, a lost GPU), the soak failed,
  or NVML reported damage during the run (new uncorrectable ECC errors, retired pages, remapped rows, a fatal XID);
- **slow**: a figure flagged against its reference, its peers or the fleet, or a soak that sagged over 3 %;
- **ok** otherwise. The node's verdict is its worst GPU's, or faulty when a node-wide check failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpukit.fleet.accept_reference import Reference, dcgm_gate
from gpukit.fleet.record import Acceptance, Figure, GpuAcceptance, worst_verdict
from gpukit.fleet.stats import Comparison, Thresholds, judge_figure

__all__ = ["fleet_values", "judge_acceptance", "judge_gpu"]


def fleet_values(records: Sequence[Mapping[str, Any]], model: str, stack_key: str | None,
                 exclude_node: str | None) -> dict[str, list[float]]:  # fmt: skip
    """Per figure, the values of every GPU of ``model`` on the same software stack in the newest acceptance of
    every other node (``History.latest_acceptances()``); only figures that passed their checks."""
    out: dict[str, list[float]] = {}
    for rec in records:
        node = rec.get("node") or {}
        if node.get("name") == exclude_node or node.get("stack_key") != stack_key:
            continue
        for gpu in rec.get("gpus") or []:
            if gpu.get("model") != model:
                continue
            for name, fig in (gpu.get("figures") or {}).items():
                if isinstance(fig, dict) and fig.get("status") == "ok" and isinstance(fig.get("value"), int | float):
                    out.setdefault(name, []).append(float(fig["value"]))
    return out


def _describe(name: str, fig: Figure, c: Comparison) -> str:
    what = {"peers": "the node's median", "fleet": "the fleet's median", "reference": "the reference"}[c.against]
    return (f"{name} {fig.value:,.1f} {fig.unit} is {c.slowness:.1%} below {what} {c.median:,.1f} "
            f"(flagged from {c.line:.1%})")  # fmt: skip


def _judge_figure(name: str, fig: Figure, peers: list[float] | None, fleet: list[float] | None,
                  reference: Reference | None, thresholds: Thresholds) -> list[str]:  # fmt: skip
    """Fill ``fig``'s comparisons and flags; returns the reasons of the flags raised."""
    if fig.status != "ok" or fig.value is None:
        return []
    ref = reference.value(name) if reference is not None else None
    sigma = reference.sigma(name) if reference is not None else None  # the noise measured with the reference
    j = judge_figure(fig.value, fig.higher_is_better, peers=peers, fleet=fleet, reference=ref, sigma=sigma,
                     thresholds=thresholds)  # fmt: skip
    for key, value in j.fields().items():
        if key == "flags":
            fig.flags = sorted(set(fig.flags) | set(value))
        else:
            setattr(fig, key, value)
    fig.reference = ref
    return [_describe(name, fig, c) for c in j.comparisons if c.flagged]


def judge_gpu(gpu: GpuAcceptance, peers: Mapping[str, list[float]], fleet: Mapping[str, list[float]] | None,
              reference: Reference | None, thresholds: Thresholds, faults: Sequence[str] = ()) -> None:  # fmt: skip
    """Judge every figure of ``gpu`` and set its verdict and reasons (``faults``: NVML's findings)."""
    reasons, faulty = list(faults), bool(faults)
    for name, fig in gpu.figures.items():
        fig.dcgm_gate, fig.dcgm_note = dcgm_gate(gpu.model, name)
        if fig.status == "failed":
            faulty = True
            reasons.append(f"{name}: {fig.reason}")
            continue
        peer_values = peers.get(name) if len(peers.get(name, [])) > 1 else None
        fleet_list = list(fleet.get(name, [])) if fleet is not None else None
        reasons += _judge_figure(name, fig, peer_values, fleet_list, reference, thresholds)
    if gpu.soak is not None:
        if gpu.soak.status == "failed":
            faulty = True
            reasons.append(f"soak: {gpu.soak.reason}")
        reasons += gpu.soak.flags
    gpu.reasons = reasons
    gpu.verdict = "faulty" if faulty else ("slow" if reasons else "ok")


def judge_acceptance(acc: Acceptance, references: Mapping[str, Reference | None],
                     fleet: Mapping[str, Mapping[str, list[float]]] | None, thresholds: Thresholds,
                     faults: Mapping[int, Sequence[str]]) -> None:  # fmt: skip
    """Judge every GPU of ``acc`` against its peers (the node's other GPUs of the same model), its model's reference
    and, with a store, the fleet; then the node's verdict. ``fleet``: per model, per figure, the fleet's values
    (None: no store given); ``faults``: per GPU index, what NVML found."""
    notes: list[str] = []
    for gpu in acc.gpus:
        same = [g for g in acc.gpus if g.model == gpu.model]
        peers: dict[str, list[float]] = {}
        for g in same:
            for name, f in g.figures.items():
                if f.status == "ok" and f.value is not None:
                    peers.setdefault(name, []).append(f.value)
        model_fleet = fleet.get(gpu.model, {}) if fleet is not None else None
        judge_gpu(gpu, peers, model_fleet, references.get(gpu.model), thresholds, faults.get(gpu.index, ()))
        if len(same) < 3:
            note = f"{gpu.model}: {len(same)} GPU(s) on this node: no node median to judge against (3 needed)"
            notes += [note] if note not in notes else []
        if references.get(gpu.model) is None:
            note = f"{gpu.model}: no reference shipped for this model: judged against its peers and the fleet only"
            notes += [note] if note not in notes else []
        if model_fleet is not None:
            n = max((len(v) for v in model_fleet.values()), default=0)
            if n < 3:
                note = f"{gpu.model}: the store holds {n} other GPU(s) of this model and stack: no fleet median"
                notes += [note] if note not in notes else []
    _node_verdict(acc, notes)


def _node_verdict(acc: Acceptance, notes: list[str]) -> None:
    verdicts = [g.verdict for g in acc.gpus]
    reasons = [f"GPU {g.index} ({g.uuid or g.model}) {g.verdict}: {'; '.join(g.reasons)}" for g in acc.gpus
               if g.verdict != "ok"]  # fmt: skip
    for name, check in (acc.node_checks or {}).items():
        if isinstance(check, dict) and check.get("status") == "failed":
            verdicts.append("faulty")
            reasons.append(f"{name}: {check.get('reason')}")
    if not acc.gpus:
        verdicts.append("faulty")
        reasons.append("no device was measured")
    acc.verdict = worst_verdict(verdicts)
    acc.reasons = reasons + [n for n in notes if n not in reasons] + [r for r in acc.reasons if r not in reasons]
