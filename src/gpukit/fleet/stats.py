"""The one copy of the slow rule: median, MAD and when a figure counts as slow (used by `accept` and `fleet` alike).

A figure is judged against up to three things: the other GPUs of its node (``peers``), the fleet's GPUs of the same
model and software stack (``fleet``), and the reference shipped for the GPU model (``reference``). Medians and MADs,
never means and standard deviations: one broken GPU must not move the line it is judged by.

The line, and why it is not the bare threshold. "Slow = 5 % below the peers' median" read literally fails its own
purpose: a GPU that really is 5 % slow measures a little above or a little below 5 %, so a line at exactly 5 %
catches it half the time. The measured run-to-run spread says how far one measurement wanders; the line is the
threshold less a noise allowance of ``recall_z`` standard deviations of that noise (z = 2.326, the one-sided 99 %
point, so a GPU slow by the threshold is caught ≥ 99 % of the time in theory and ≥ 95 % with the estimate of the
noise itself uncertain). A healthy GPU sits within about 1.5 % (max/min − 1 over ten runs, σ ≈ 0.5 %) of the median;
the line for 5 % is then ≈ 3.9 %, eight σ away from it, so healthy GPUs do not reach it. The allowance never takes
more than ``max_allowance`` of the threshold (the line for 5 % never drops below 2.5 %): a figure too noisy for its
threshold gets a reason saying so instead of a line that would flag healthy GPUs.

The noise σ comes from the run-to-run spread (max/min − 1 over ``spread_runs`` runs), divided by d2(n), the
expected range of n standard normal draws (ASTM E2587 / Montgomery's control-chart tables). Without a measured spread,
a comparison over at least ``min_values_for_noise`` values estimates σ from their own scaled MAD (1.4826 × MAD,
the normal-consistent scale); with neither, the line is the bare threshold and a reason says so.

``mad`` is the raw median absolute deviation (not scaled); ``distance_in_mads`` is in raw MADs, signed: negative
below the median.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "MAD_TO_SIGMA",
    "MIN_VALUES",
    "Center",
    "Comparison",
    "Judgement",
    "Thresholds",
    "distance_in_mads",
    "judge",
    "judge_figure",
    "judge_reference",
    "mad",
    "median",
    "noise_line",
    "sigma_from_spread",
]

MIN_VALUES = 3  # fewer values than this: no median to judge against
MAD_TO_SIGMA = 1.4826  # 1 / Φ⁻¹(3/4): a normal's σ from its raw MAD
# d2(n): expected range of n standard normal draws (control-chart constant), n = 2…15.
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078,
       11: 3.173, 12: 3.258, 13: 3.336, 14: 3.407, 15: 3.472}  # fmt: skip


@dataclass(frozen=True)
class Thresholds:
    """When a figure counts as slow: a fraction below the peers' median, the fleet's median, or the reference."""

    slow_vs_peers: float = 0.05
    slow_vs_fleet: float = 0.05
    slow_vs_reference: float = 0.10
    recall_z: float = 2.326  # noise allowance in σ: one-sided 99 %
    max_allowance: float = 0.5  # the allowance takes at most this fraction of the threshold
    spread_runs: int = 10  # the spread given is max/min − 1 over this many runs
    min_values_for_noise: int = 8  # values needed to estimate the noise from their own MAD

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def median(xs: Sequence[float]) -> float:
    """The median of ``xs`` (ValueError when empty)."""
    if not xs:
        raise ValueError("median of no values")
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def mad(xs: Sequence[float], med: float | None = None) -> float:
    """The raw median absolute deviation from the median (not scaled to σ: multiply by MAD_TO_SIGMA for that);
    ``med``: the median of ``xs`` when the caller has it already."""
    m = median(xs) if med is None else med
    return median([abs(x - m) for x in xs])


def distance_in_mads(x: float, med: float, mad_value: float) -> float | None:
    """(x − median) / MAD, signed (negative below the median); None when the MAD is 0 (all values equal)."""
    if mad_value <= 0:
        return None
    return (x - med) / mad_value


def sigma_from_spread(spread: float, runs: int = 10) -> float:
    """The relative σ of one measurement from its run-to-run spread (max/min − 1 over ``runs`` runs): spread / d2."""
    if runs < 2:
        raise ValueError("a spread needs at least two runs")
    return spread / _D2[min(runs, max(_D2))]


def noise_line(threshold: float, sigma: float | None, t: Thresholds) -> tuple[float, str | None]:
    """The slowness (fraction) from which a figure is flagged, and a reason when the noise limits it."""
    if sigma is None:
        return threshold, "no measured spread: the line is the bare threshold"
    allowance = t.recall_z * sigma
    cap = t.max_allowance * threshold
    if allowance > cap:
        return threshold - cap, (
            f"noise σ {sigma:.2%} is too large for a {threshold:.0%} threshold: the line is held at "
            f"{threshold - cap:.1%}, and healthy GPUs may cross it"
        )
    return threshold - allowance, None


@dataclass(frozen=True)
class Comparison:
    """One figure against one thing (``against``: peers, fleet or reference)."""

    against: str
    n: int  # values the median came from (1 for a reference)
    median: float | None = None  # the median (or the reference value)
    mad: float | None = None  # raw MAD of those values (None for a reference)
    ratio: float | None = None  # value / median
    slowness: float | None = None  # fraction slower than the median in the figure's direction (0.06 = 6 % slower)
    mads: float | None = None  # signed distance in raw MADs
    line: float | None = None  # the slowness from which it is flagged
    flagged: bool = False
    reason: str | None = None  # why there is no judgement, or what limits it

    @property
    def flag(self) -> str:
        return f"slow_vs_{self.against}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _slowness(value: float, med: float, higher_is_better: bool) -> float:
    # A fraction slower in the figure's direction: 1 − value/median for rates, 1 − median/value for times.
    return 1 - value / med if higher_is_better else 1 - med / value


@dataclass(frozen=True)
class Center:
    """The values a figure is judged against, reduced once: how many, their median and raw MAD."""

    n: int
    median: float | None
    mad: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Center:
        if not values:
            return cls(0, None, None)
        med = median(values)
        return cls(len(values), med, mad(values, med))


def _sigma(spread: float | None, sigma: float | None, t: Thresholds) -> float | None:
    if sigma is not None:
        return sigma
    return sigma_from_spread(spread, t.spread_runs) if spread is not None else None


def judge(
    value: float,
    values: Sequence[float] | Center,
    *,
    against: str,
    higher_is_better: bool = True,
    spread: float | None = None,
    sigma: float | None = None,
    thresholds: Thresholds | None = None,
) -> Comparison:
    """Judge ``value`` against the median of ``values`` (this GPU's own value included, as the caller chooses).

    The noise is ``sigma`` (relative σ) when given, else from ``spread`` (run-to-run max/min − 1), else from the
    values' own scaled MAD when there are at least ``thresholds.min_values_for_noise`` of them.
    """
    t = thresholds or Thresholds()
    c = values if isinstance(values, Center) else Center.of(values)
    if c.n < MIN_VALUES or c.median is None or c.mad is None:
        return Comparison(against, c.n, reason=f"only {c.n} value(s) to compare against: no {against} median")
    med, mad_value = c.median, c.mad
    if med <= 0 or value <= 0:
        return Comparison(against, c.n, med, mad_value, reason=f"non-positive value or {against} median")
    noise = _sigma(spread, sigma, t)
    if noise is None and c.n >= t.min_values_for_noise:
        noise = MAD_TO_SIGMA * mad_value / med
    line, reason = noise_line(getattr(t, f"slow_vs_{against}"), noise, t)
    slow = _slowness(value, med, higher_is_better)
    mads = distance_in_mads(value, med, mad_value)
    return Comparison(against, c.n, med, mad_value, value / med, slow, mads, line, slow >= line, reason)


def judge_reference(
    value: float,
    reference: float,
    *,
    higher_is_better: bool = True,
    spread: float | None = None,
    sigma: float | None = None,
    thresholds: Thresholds | None = None,
) -> Comparison:
    """Judge ``value`` against the reference figure shipped for the GPU model."""
    t = thresholds or Thresholds()
    if reference <= 0 or value <= 0:
        return Comparison("reference", 1, reference, reason="non-positive value or reference")
    line, reason = noise_line(t.slow_vs_reference, _sigma(spread, sigma, t), t)
    slow = _slowness(value, reference, higher_is_better)
    return Comparison("reference", 1, reference, None, value / reference, slow, None, line, slow >= line, reason)


@dataclass(frozen=True)
class Judgement:
    """One figure judged against everything it could be: the flags raised and the comparisons behind them."""

    peers: Comparison | None = None
    fleet: Comparison | None = None
    reference: Comparison | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def comparisons(self) -> list[Comparison]:
        return [c for c in (self.peers, self.fleet, self.reference) if c is not None]

    @property
    def flags(self) -> list[str]:
        return [c.flag for c in self.comparisons if c.flagged]

    def fields(self) -> dict[str, Any]:
        """The acceptance document's per-figure fields (vs_reference, node_median, vs_node, fleet_*, flags)."""
        p, f, r = self.peers, self.fleet, self.reference
        return {
            "vs_reference": r.ratio if r else None,
            "node_median": p.median if p else None,
            "vs_node": p.ratio if p else None,
            "fleet_median": f.median if f else None,
            "fleet_mad": f.mad if f else None,
            "vs_fleet": f.ratio if f else None,
            "fleet_mads": f.mads if f else None,
            "flags": self.flags,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "peers": self.peers.to_dict() if self.peers else None,
            "fleet": self.fleet.to_dict() if self.fleet else None,
            "reference": self.reference.to_dict() if self.reference else None,
            "flags": self.flags,
            "reasons": list(self.reasons),
        }


def judge_figure(
    value: float,
    higher_is_better: bool = True,
    *,
    peers: Sequence[float] | Center | None = None,
    fleet: Sequence[float] | Center | None = None,
    reference: float | None = None,
    spread: float | None = None,
    sigma: float | None = None,
    thresholds: Thresholds | None = None,
) -> Judgement:
    """Judge one figure against whichever of ``peers``, ``fleet`` and ``reference`` are given (None: not judged).

    ``spread`` is the figure's measured run-to-run spread (max/min − 1 over ``thresholds.spread_runs`` runs);
    ``sigma``, when given, the relative noise σ directly (it wins over ``spread``).
    """
    kw: dict[str, Any] = {"higher_is_better": higher_is_better, "spread": spread, "sigma": sigma}
    kw["thresholds"] = thresholds
    p = judge(value, peers, against="peers", **kw) if peers is not None else None
    f = judge(value, fleet, against="fleet", **kw) if fleet is not None else None
    r = judge_reference(value, reference, **kw) if reference is not None else None
    reasons = [f"{c.against}: {c.reason}" for c in (p, f, r) if c is not None and c.reason]
    return Judgement(p, f, r, reasons)
