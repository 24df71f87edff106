"""The slow rule (gpukit.fleet.stats): median, raw MAD, the noise allowance, and no judgement on too few values."""

from __future__ import annotations

import pytest

from gpukit.fleet import stats


def test_median_and_raw_mad() -> None:
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    # |x − 2| = 1, 0, 1, 8 → median 1 (raw, not scaled by 1.4826)
    assert stats.mad([1.0, 2.0, 3.0, 10.0, 2.0]) == 1.0
    with pytest.raises(ValueError):
        stats.median([])


def test_distance_in_mads_is_signed_and_none_without_spread() -> None:
    assert stats.distance_in_mads(94.0, 100.0, 2.0) == -3.0
    assert stats.distance_in_mads(106.0, 100.0, 2.0) == 3.0
    assert stats.distance_in_mads(100.0, 100.0, 0.0) is None


def test_sigma_from_spread_uses_the_expected_range_of_n_draws() -> None:
    assert stats.sigma_from_spread(0.03078, runs=10) == pytest.approx(0.01)
    assert stats.sigma_from_spread(0.01128, runs=2) == pytest.approx(0.01)


def test_line_is_the_threshold_less_the_noise_allowance() -> None:
    t = stats.Thresholds()
    line, reason = stats.noise_line(0.05, 0.005, t)
    assert line == pytest.approx(0.05 - 2.326 * 0.005) and reason is None
    line, reason = stats.noise_line(0.05, 0.02, t)  # too noisy: held at half the threshold, and said so
    assert line == pytest.approx(0.025) and reason is not None and "too large" in reason
    assert stats.noise_line(0.05, None, t) == (0.05, "no measured spread: the line is the bare threshold")


PEERS = [100.0, 100.3, 99.8, 100.1, 99.9, 100.2, 100.0]


def test_a_gpu_exactly_five_percent_slow_is_flagged_and_a_healthy_one_is_not() -> None:
    slow = stats.judge_figure(95.0, peers=[*PEERS, 95.0], spread=0.015)
    assert slow.flags == ["slow_vs_peers"]
    assert slow.peers is not None and slow.peers.slowness == pytest.approx(0.05)
    assert slow.peers.line == pytest.approx(0.05 - 2.326 * 0.015 / 3.078)
    assert slow.fields()["vs_node"] == pytest.approx(0.95) and slow.fields()["node_median"] == 100.0
    healthy = stats.judge_figure(98.6, peers=[*PEERS, 98.6], spread=0.015)
    assert healthy.flags == []


def test_direction_lower_is_better() -> None:
    # a latency 6 % longer than the median is slower; 6 % shorter is not
    assert stats.judge_figure(106.0, False, peers=[*PEERS, 106.0], spread=0.01).flags == ["slow_vs_peers"]
    assert stats.judge_figure(94.0, False, peers=[*PEERS, 94.0], spread=0.01).flags == []


def test_reference_and_fleet_flags_are_named_apart() -> None:
    fleet = [100.0 + 0.1 * (i % 5) for i in range(40)]
    j = stats.judge_figure(89.0, fleet=[*fleet, 89.0], reference=100.0, spread=0.01)
    assert j.flags == ["slow_vs_fleet", "slow_vs_reference"]
    assert j.fleet is not None and j.fleet.mads is not None and j.fleet.mads < -10
    assert stats.judge_figure(92.0, reference=100.0, spread=0.01).flags == []  # 8 % below the reference: within 10 %


def test_fewer_than_three_values_give_a_reason_and_never_a_flag() -> None:
    j = stats.judge_figure(50.0, peers=[100.0, 50.0], fleet=[50.0])
    assert j.flags == []
    assert j.reasons == [
        "peers: only 2 value(s) to compare against: no peers median",
        "fleet: only 1 value(s) to compare against: no fleet median",
    ]


def test_noise_from_the_values_mad_when_no_spread_is_given() -> None:
    values = [100.0, 100.4, 99.6, 100.2, 99.8, 100.0, 100.4, 99.6, 100.0]
    c = stats.judge(95.0, [*values, 95.0], against="fleet")
    assert c.reason is None  # σ from 1.4826 × MAD / median, not the bare threshold
    assert c.line is not None and c.line < 0.05


def test_a_center_reduced_once_judges_the_same_as_the_values() -> None:
    values = [100.0, 100.4, 99.6, 100.2, 99.8, 100.0, 100.4, 99.6, 94.0]
    center = stats.Center.of(values)
    assert (center.n, center.median) == (9, 100.0) and center.mad == pytest.approx(0.4)
    a = stats.judge(94.0, values, against="fleet", spread=0.01)
    b = stats.judge(94.0, center, against="fleet", spread=0.01)
    assert a == b and a.flagged and a.mads == pytest.approx(-15.0)
    assert stats.Center.of([]) == stats.Center(0, None, None)


def test_sigma_given_directly_wins_over_the_spread() -> None:
    c = stats.judge(96.0, PEERS, against="peers", spread=0.10, sigma=0.001)
    assert c.line == pytest.approx(0.05 - 2.326 * 0.001) and not c.flagged  # 4 % slow: under the line
    c = stats.judge(95.1, PEERS, against="peers", sigma=0.001)  # 4.9 % slow: over the 4.77 % line
    assert c.flagged
