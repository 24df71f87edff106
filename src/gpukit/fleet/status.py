"""`gpukit fleet status`: every GPU of the fleet × each acceptance figure, as a fraction of the fleet's median.

The fleet is the newest acceptance of each node in the store. Each figure of each GPU is judged again, with the one
slow rule (:mod:`gpukit.fleet.stats`), against three things: the other GPUs of its node with the same model, every
GPU of the fleet with the same model and software stack (``stack_key``: driver, CUDA, torch, gpukit), and the
reference saved with the figure. A figure that failed its check is not judged: it makes the GPU faulty.

The noise σ of each figure comes from its measured run-to-run spread (max/min − 1 over repeated runs on one GPU,
divided by the expected range of that many normal draws): from a spread file given (``sigmas``), else from the
reference shipped for the GPU model (what `gpukit accept` judges with); without either, the fleet's own scaled MAD
(1.4826 × MAD / median), which holds run-to-run noise and the GPU-to-GPU difference together. Figure names are
treated generically: unit and direction come from the saved figures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.fleet import stats
from gpukit.fleet.record import Acceptance, Figure, Soak

__all__ = [
    "MIN_NODES",
    "Cell",
    "FigureGroup",
    "FleetStatus",
    "GpuRow",
    "fleet_status",
    "load_latest",
    "load_sigmas",
    "parse_records",
    "require_fleet",
    "short_name",
]

MIN_NODES = 2  # a fleet median needs more than one node: one node's median is its peers', not a fleet's


@dataclass(frozen=True)
class Cell:
    """One figure of one GPU as the fleet sees it."""

    figure: str
    unit: str
    higher_is_better: bool
    status: str  # ok | failed | skipped
    value: float | None
    vs_fleet: float | None  # value / the fleet median
    fleet_mads: float | None  # signed distance from the fleet median in raw MADs
    flags: list[str]  # slow_vs_peers, slow_vs_fleet, slow_vs_reference; "failed" for a failed check
    telemetry: dict[str, Any]  # what NVML read while the figure was measured
    reason: str | None = None  # why it failed or was skipped
    judgement: stats.Judgement | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "status": self.status,
            "value": self.value,
            "vs_fleet": self.vs_fleet,
            "fleet_mads": self.fleet_mads,
            "telemetry": self.telemetry,
            "reason": self.reason,
            **(self.judgement.fields() if self.judgement else {}),  # the acceptance document's fields
            "flags": list(self.flags),
        }


@dataclass
class GpuRow:
    """One GPU of one node: its newest acceptance's figures, judged against the fleet."""

    node: str
    gpu: int
    uuid: str | None
    model: str
    stack_key: str
    acceptance_id: int | None
    started_at: str
    cells: dict[str, Cell] = field(default_factory=dict)
    soak: Soak | None = None

    @property
    def verdict(self) -> str:
        if any(c.status == "failed" for c in self.cells.values()):
            return "faulty"
        return "slow" if any(c.flags for c in self.cells.values()) else "ok"

    @property
    def flagged(self) -> bool:
        return self.verdict != "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpu": self.gpu,
            "uuid": self.uuid,
            "model": self.model,
            "stack_key": self.stack_key,
            "acceptance_id": self.acceptance_id,
            "started_at": self.started_at,
            "verdict": self.verdict,
            "figures": {name: c.to_dict() for name, c in self.cells.items()},
        }


@dataclass(frozen=True)
class FigureGroup:
    """One figure over the fleet's GPUs of one model and software stack: the median it is judged by."""

    model: str
    stack_key: str
    figure: str
    unit: str
    higher_is_better: bool
    n_values: int
    n_nodes: int
    median: float | None
    mad: float | None
    sigma: float | None  # relative noise σ used for the line
    sigma_source: str  # "measured spread" (given) | "reference spread" | "fleet MAD" | "none"
    reason: str | None = None  # why there is no fleet median

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class FleetStatus:
    """The fleet: a row per GPU, the figures seen (in order), the medians per group and what limits the view."""

    nodes: list[str]
    figures: list[str]  # in the order the documents list them
    rows: list[GpuRow]
    groups: list[FigureGroup]
    thresholds: stats.Thresholds
    reasons: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[GpuRow]:
        return [r for r in self.rows if r.flagged]

    def group(self, model: str, stack_key: str, figure: str) -> FigureGroup | None:
        for g in self.groups:
            if (g.model, g.stack_key, g.figure) == (model, stack_key, figure):
                return g
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "figures": self.figures,
            "thresholds": self.thresholds.to_dict(),
            "groups": [g.to_dict() for g in self.groups],
            "gpus": [r.to_dict() for r in self.rows],
            "flagged": [{"node": r.node, "gpu": r.gpu, "verdict": r.verdict} for r in self.flagged],
            "reasons": list(self.reasons),
        }


def parse_records(records: Sequence[Mapping[str, Any]]) -> list[tuple[Acceptance, int | None]]:
    """The store's acceptance documents read (with their store id); ConfigError on one that is not an acceptance."""
    out = []
    for rec in records:
        try:
            out.append((Acceptance.from_dict(dict(rec)), rec.get("id")))
        except (ValueError, TypeError, KeyError) as e:
            raise ConfigError(
                f"acceptance {rec.get('id')} in the store cannot be read: {e}",
                hint="upgrade gpukit to the version that wrote it, or remove that record",
            ) from e
    return out


_UNIT_SUFFIXES = ("_tflops", "_gbps", "_ms", "_s")


def short_name(figure: str) -> str:
    """A figure's name without its unit suffix, for a column header: ``gemm_bf16_tflops`` → ``gemm_bf16``."""
    for suffix in _UNIT_SUFFIXES:
        if figure.endswith(suffix):
            return figure.removesuffix(suffix)
    return figure


_Key = tuple[str, str, str]  # (model, stack_key, figure)


def _collect(accs: Sequence[Acceptance]) -> tuple[dict[_Key, list[float]], dict[_Key, set[str]], dict[_Key, Figure]]:
    values: dict[_Key, list[float]] = defaultdict(list)
    nodes: dict[_Key, set[str]] = defaultdict(set)
    sample: dict[_Key, Figure] = {}
    for acc in accs:
        for g in acc.gpus:
            for name, fig in g.figures.items():
                key = (g.model, str(acc.node.get("stack_key") or "-"), name)
                sample.setdefault(key, fig)
                if fig.status == "ok" and fig.value is not None:
                    values[key].append(fig.value)
                    nodes[key].add(str(acc.node.get("name")))
    return values, nodes, sample


def _sigma(model: str, name: str, center: stats.Center, sigmas: Mapping[str, float] | None,
           use_reference: bool) -> tuple[float | None, str]:  # fmt: skip
    """The noise σ of one figure: the spread given, else the shipped reference's (what `accept` uses), else the
    fleet's own scaled MAD."""
    from gpukit.fleet.accept_reference import reference_for

    if sigmas is not None and name in sigmas:
        return sigmas[name], "measured spread"
    ref = reference_for(model) if use_reference and sigmas is None else None
    if ref is not None and (spread := ref.spread(name)) is not None:
        runs = (ref.figures.get(name) or {}).get("runs") or ref.runs or 10
        return stats.sigma_from_spread(spread, int(runs)), "reference spread"
    if center.n >= stats.Thresholds().min_values_for_noise and center.median and center.mad is not None:
        return stats.MAD_TO_SIGMA * center.mad / center.median, "fleet MAD"
    return None, "none"


def _group(key: _Key, values: list[float], n_nodes: int, fig: Figure, sigmas: Mapping[str, float] | None,
           use_reference: bool) -> FigureGroup:  # fmt: skip
    model, stack_key, name = key
    center = stats.Center.of(values)
    sigma, source = _sigma(model, name, center, sigmas, use_reference)
    reason = None
    if n_nodes < MIN_NODES:
        reason = f"{name} of {model} ({stack_key}) measured on {n_nodes} node(s): no fleet median"
    elif center.n < stats.MIN_VALUES:
        reason = f"{name} of {model} ({stack_key}): only {center.n} value(s), no fleet median"
    med, mad = (center.median, center.mad) if reason is None else (None, None)
    return FigureGroup(model, stack_key, name, fig.unit, fig.higher_is_better, center.n, n_nodes, med, mad, sigma,
                       source, reason)  # fmt: skip


def _cell(name: str, fig: Figure, peers: stats.Center, group: FigureGroup, t: stats.Thresholds) -> Cell:
    if fig.status != "ok" or fig.value is None:
        flags = ["failed"] if fig.status == "failed" else []
        return Cell(name, fig.unit, fig.higher_is_better, fig.status, None, None, None, flags, fig.telemetry,
                    fig.reason or fig.status)  # fmt: skip
    fleet = stats.Center(group.n_values, group.median, group.mad) if group.median is not None else None
    j = stats.judge_figure(
        fig.value,
        fig.higher_is_better,
        peers=peers,
        fleet=fleet,
        reference=fig.reference,
        sigma=group.sigma,
        thresholds=t,
    )
    vs, mads = (j.fleet.ratio, j.fleet.mads) if j.fleet else (None, None)
    return Cell(name, fig.unit, fig.higher_is_better, "ok", fig.value, vs, mads, j.flags, fig.telemetry, None, j)


def _peers(acc: Acceptance) -> dict[tuple[str, str], stats.Center]:
    """Per (model, figure), the node's values on its GPUs of that model (the GPU judged included), reduced once."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for g in acc.gpus:
        for name, f in g.figures.items():
            if f.status == "ok" and f.value is not None:
                values[(g.model, name)].append(f.value)
    return {k: stats.Center.of(v) for k, v in values.items()}


def fleet_status(
    records: Sequence[Mapping[str, Any]],
    *,
    thresholds: stats.Thresholds | None = None,
    sigmas: Mapping[str, float] | None = None,
    use_reference: bool = True,
) -> FleetStatus:
    """The fleet from the newest acceptance of each node (``records``, as the store returns them).

    The noise of each figure: ``sigmas`` (figure → relative σ, from a spread file: :func:`load_sigmas`) when given;
    else the spread of the reference shipped for the GPU model (as `gpukit accept` judges it), unless
    ``use_reference`` is False; else the fleet's own scaled MAD.
    """
    t = thresholds or stats.Thresholds()
    parsed = parse_records(records)
    accs = [a for a, _ in parsed]
    values, nodes, sample = _collect(accs)
    groups = {k: _group(k, values.get(k, []), len(nodes.get(k, ())), sample[k], sigmas, use_reference) for k in sample}
    rows = []
    for acc, rec_id in parsed:
        stack_key = str(acc.node.get("stack_key") or "-")
        peers = _peers(acc)
        for g in acc.gpus:
            row = GpuRow(str(acc.node.get("name")), g.index, g.uuid, g.model, stack_key, rec_id, acc.started_at,
                         soak=g.soak)  # fmt: skip
            for name, fig in g.figures.items():
                mine = peers.get((g.model, name), stats.Center(0, None, None))
                row.cells[name] = _cell(name, fig, mine, groups[(g.model, stack_key, name)], t)
            rows.append(row)
    reasons = sorted({g.reason for g in groups.values() if g.reason})
    names = sorted({str(a.node.get("name")) for a in accs})
    return FleetStatus(names, list(dict.fromkeys(k[2] for k in sample)), rows, list(groups.values()), t, reasons)


def load_latest(db: str | Path | None) -> tuple[list[dict[str, Any]], str]:
    """The newest acceptance of each node in the store at ``db`` (a file or a ``postgresql://`` URL), and the
    store's name as messages show it (no password). Errors are ConfigError with a hint (bad path, unreachable)."""
    from gpukit.history import open_history

    with open_history(db, create=False) as history:
        return history.latest_acceptances(), history.location


def require_fleet(records: Sequence[Mapping[str, Any]], where: str) -> None:
    """ConfigError unless ``records`` hold at least :data:`MIN_NODES` nodes: one node has no fleet median."""
    names = sorted({str((rec.get("node") or {}).get("name")) for rec in records})
    if not names:
        raise ConfigError(
            f"no acceptance runs in {where}",
            hint="run `gpukit accept --db URL` on each node first (or give --db the store they wrote to)",
        )
    if len(names) < MIN_NODES:
        raise ConfigError(
            f"only one node ({names[0]}) in {where}: there is no fleet median to judge its GPUs against",
            hint="accept more nodes into this store (`gpukit accept --db URL` on each); `gpukit accept` alone "
            "judges one node's GPUs against each other and against the reference",
        )


def load_sigmas(path: Path) -> dict[str, float]:
    """Figure → relative noise σ from a spread file (``{"runs": 10, "figures": {name: {"spread": 0.008, "runs": 7}}}``,
    spread = max/min − 1 over the runs, as `gpukit accept`'s repeated runs give it); ConfigError when unreadable."""
    import json

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        runs = doc.get("runs") or 10
        return {
            str(name): stats.sigma_from_spread(float(f["spread"]), int(f.get("runs") or runs))
            for name, f in doc["figures"].items()
            if f.get("spread") is not None
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"cannot read the spread file {path}: {e}",
            hint='give a JSON file {"runs": 10, "figures": {"gemm_bf16_tflops": {"spread": 0.008}, …}}',
        ) from e
