"""Detection on data (issue 21): a simulated fleet of 64 nodes × 8 GPUs, figures drawn around the H200 medians with
the measured run-to-run spread, GPUs slowed by 3, 5 and 10 % on one figure each. The slow rule must catch ≥ 95 % of
the 5 % ones and all of the 10 % ones, and flag ≤ 1 % of the healthy GPUs.

Fixed seeds; six fleets (3,072 GPUs, 144 slowed per step) so the rates are stable. The same harness fed a rule
loosened to flag near everything, or one with no noise allowance (a bare 5 % line), must fail its numbers: the
test can tell a good rule from a bad one.
"""

from __future__ import annotations

import random

import pytest

import fleet_synthetic as synth
from gpukit.fleet import stats
from gpukit.fleet.status import fleet_status

NODES, GPUS, FLEETS, PER_STEP = 64, 8, 6, 24
STEPS = (0.03, 0.05, 0.10)


def _at_limit() -> dict:
    """The spread file with every figure at the issue's limit, 1.5 % (max/min − 1 over ten runs)."""
    doc = synth.load_spread()
    return {**doc, "runs": 10, "figures": {k: {**f, "spread": 0.015, "runs": 10} for k, f in doc["figures"].items()}}


def _simulate(
    thresholds: stats.Thresholds, with_spread: bool = True, fleets: int = FLEETS, doc: dict | None = None
) -> dict[str, float]:
    doc = doc or synth.load_spread()
    figures = list(doc["figures"])
    caught = {s: 0 for s in STEPS}
    total = {s: 0 for s in STEPS}
    healthy = false_flags = 0
    for seed in range(fleets):
        rng = random.Random(seed)
        places = rng.sample([(n, g) for n in range(NODES) for g in range(GPUS)], PER_STEP * len(STEPS))
        slowed = {p: (rng.choice(figures), STEPS[i // PER_STEP]) for i, p in enumerate(places)}
        records = synth.fleet(NODES, GPUS, seed=seed, slowed=slowed, doc=doc, samples=False)
        sigmas = synth.sigmas(doc) if with_spread else None
        status = fleet_status(records, thresholds=thresholds, sigmas=sigmas, use_reference=with_spread)
        for row in status.rows:
            place = (int(row.node.removeprefix("node-")), row.gpu)
            if place in slowed:
                figure, step = slowed[place]
                total[step] += 1
                caught[step] += bool(row.cells[figure].flags)  # caught on the figure that was slowed
            else:
                healthy += 1
                false_flags += row.flagged
    rates = {f"recall_{round(s * 100)}": caught[s] / total[s] for s in STEPS}
    rates["false_flags"] = false_flags / healthy
    return rates


@pytest.mark.parametrize(
    ("with_spread", "at_limit"),
    [(True, False), (False, False), (True, True)],
    ids=["measured-spread", "fleet-mad", "spread-at-1.5%"],
)
def test_the_slow_rule_meets_the_issue_numbers(with_spread: bool, at_limit: bool) -> None:
    rates = _simulate(stats.Thresholds(), with_spread, doc=_at_limit() if at_limit else None)
    assert rates["recall_5"] >= 0.95, rates
    assert rates["recall_10"] == 1.0, rates
    assert rates["false_flags"] <= 0.01, rates
    # 3 % is under the 5 % threshold: the line (≈ 3.9 %) catches only the few whose noise pushed them over it
    assert rates["recall_3"] < 0.5, rates


def test_a_rule_loosened_to_flag_near_everything_fails_the_false_flag_bound() -> None:
    loose = stats.Thresholds(slow_vs_peers=0.002, slow_vs_fleet=0.002, slow_vs_reference=0.002)
    rates = _simulate(loose, fleets=2)
    assert rates["recall_5"] == 1.0 and rates["false_flags"] > 0.01, rates


def test_a_bare_five_percent_line_misses_the_recall_bound() -> None:
    bare = stats.Thresholds(recall_z=0.0)  # the line exactly at 5 %: a GPU 5 % slow sits on it half the time
    rates = _simulate(bare, fleets=2)
    assert rates["recall_5"] < 0.95, rates
