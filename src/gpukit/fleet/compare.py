"""`gpukit fleet compare NODE NODE`: two nodes' newest acceptances figure by figure — and first, whether they were
taken under the same settings. Figures taken under a different driver, CUDA, software stack, power limit, clock
setting or ECC mode do not compare the hardware: the comparison names each difference, and the CLI refuses it
unless told ``--force``.

A difference between the two nodes' medians is called noise when it is inside the band the run-to-run noise allows
(z · σ · √2: two medians, each as noisy as one GPU at most).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpukit.errors import ConfigError
from gpukit.fleet import stats
from gpukit.fleet.record import Acceptance
from gpukit.fleet.status import parse_records

__all__ = ["FigureDiff", "NodeComparison", "SettingDiff", "compare_nodes", "settings_of"]

_NODE_SETTINGS = (("driver", "driver"), ("cuda", "CUDA"), ("stack_key", "software stack"))


def _is_setting(key: str) -> bool:
    """A key of a GPU's telemetry "before" that is a setting (a limit, a clock chosen, ECC on or off), not a
    reading: ``power_limit_w``, ``sm_clock_max_mhz``, ``app_sm_clock_mhz``, ``ecc_enabled`` — not ``sm_clock_mhz``."""
    if "power_limit" in key or key == "ecc_enabled":
        return True
    return "clock" in key and any(w in key for w in ("max", "app", "locked", "limit", "target"))


@dataclass(frozen=True)
class SettingDiff:
    what: str  # "driver", "power_limit_w of GPU 0", …
    a: Any
    b: Any

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FigureDiff:
    """One figure on both nodes: each node's median over its GPUs, B / A, and whether that is beyond the noise."""

    figure: str
    unit: str
    higher_is_better: bool
    a_median: float | None
    b_median: float | None
    a_values: list[float]
    b_values: list[float]
    ratio: float | None  # b_median / a_median
    noise_band: float | None  # |ratio − 1| inside this is noise
    verdict: str  # same | B faster | B slower | n/a

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class NodeComparison:
    a: str
    b: str
    a_started_at: str
    b_started_at: str
    differences: list[SettingDiff] = field(default_factory=list)
    figures: list[FigureDiff] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return not self.differences

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "a_started_at": self.a_started_at,
            "b_started_at": self.b_started_at,
            "comparable": self.comparable,
            "differences": [d.to_dict() for d in self.differences],
            "figures": [f.to_dict() for f in self.figures],
        }


def settings_of(acc: Acceptance) -> dict[str, Any]:
    """The settings the figures depend on: driver, CUDA, stack, and per GPU its power limit and clock settings."""
    out: dict[str, Any] = {label: acc.node.get(key) for key, label in _NODE_SETTINGS}
    for g in acc.gpus:
        before = (g.telemetry or {}).get("before") or {}
        for key, value in before.items():
            if _is_setting(key):
                out[f"{key} of GPU {g.index}"] = value
    return out


def _differences(a: Acceptance, b: Acceptance) -> list[SettingDiff]:
    sa, sb = settings_of(a), settings_of(b)
    return [SettingDiff(k, sa.get(k), sb.get(k)) for k in dict.fromkeys([*sa, *sb]) if sa.get(k) != sb.get(k)]


def _values(acc: Acceptance, name: str) -> list[float]:
    figs = [g.figures.get(name) for g in acc.gpus]
    return [f.value for f in figs if f is not None and f.status == "ok" and f.value is not None]


def _figure(name: str, a: Acceptance, b: Acceptance, sigmas: Mapping[str, float], z: float) -> FigureDiff:
    spec = next(g.figures[name] for g in (*a.gpus, *b.gpus) if name in g.figures)
    va, vb = _values(a, name), _values(b, name)
    if not va or not vb:
        return FigureDiff(name, spec.unit, spec.higher_is_better, None, None, va, vb, None, None, "n/a")
    ma, mb = stats.median(va), stats.median(vb)
    if name in sigmas:
        sigma: float | None = sigmas[name]
    elif len(va) + len(vb) >= stats.Thresholds().min_values_for_noise:
        pooled = [v / ma for v in va] + [v / mb for v in vb]
        sigma = stats.MAD_TO_SIGMA * stats.mad(pooled)
    else:
        sigma = None
    band = z * sigma * math.sqrt(2) if sigma is not None else None
    ratio = mb / ma
    if band is None:
        verdict = "n/a"
    elif abs(ratio - 1) <= band:
        verdict = "same"
    else:
        verdict = "B faster" if (ratio > 1) == spec.higher_is_better else "B slower"
    return FigureDiff(name, spec.unit, spec.higher_is_better, ma, mb, va, vb, ratio, band, verdict)


def _find(parsed: Sequence[Acceptance], name: str) -> Acceptance:
    for acc in parsed:
        if acc.node.get("name") == name:
            return acc
    known = sorted(str(a.node.get("name")) for a in parsed)
    shown = ", ".join(known[:8]) + (f", … ({len(known)} in all)" if len(known) > 8 else "")
    raise ConfigError(f"node {name!r} is not in the store", hint=f"nodes with an acceptance: {shown or 'none'}")


def compare_nodes(
    records: Sequence[Mapping[str, Any]],
    a: str,
    b: str,
    *,
    sigmas: Mapping[str, float] | None = None,
    thresholds: stats.Thresholds | None = None,
) -> NodeComparison:
    """Compare node ``b``'s newest acceptance with node ``a``'s (ConfigError when either is not in ``records``)."""
    parsed = [acc for acc, _ in parse_records(records)]
    acc_a, acc_b = _find(parsed, a), _find(parsed, b)
    z = (thresholds or stats.Thresholds()).recall_z
    names = list(dict.fromkeys(n for acc in (acc_a, acc_b) for g in acc.gpus for n in g.figures))
    return NodeComparison(
        a,
        b,
        acc_a.started_at,
        acc_b.started_at,
        _differences(acc_a, acc_b),
        [_figure(n, acc_a, acc_b, sigmas or {}, z) for n in names],
    )
