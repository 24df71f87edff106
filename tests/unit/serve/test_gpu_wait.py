"""The executing thread's wait for the GPU (``gpukit.serve.model.GpuWait``): it naps through a long batch but for
its tail, never naps on a short one, and its expectation converges on the work's real time from either side."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpukit.serve.model import MIN_NAP_S, SPIN_TAIL_S, GpuWait, ModelRunner, _buckets


def test_no_nap_before_a_batch_of_that_size_was_seen_nor_for_short_work() -> None:
    wait = GpuWait()
    assert wait.nap_s(64, 0.0) == 0.0  # nothing known yet: spin
    wait.observe(8, 0.0004)  # the seed CNN's pass: 0.4 ms
    assert wait.nap_s(8, 0.00005) == 0.0
    wait.observe(64, SPIN_TAIL_S + MIN_NAP_S - 1e-4)  # just too short to be worth a wake-up
    assert wait.nap_s(64, 0.0) == 0.0
    assert wait.naps == 0


def test_a_long_batch_naps_but_for_the_tail_and_what_has_passed() -> None:
    wait = GpuWait(tail_s=0.001, min_nap_s=0.001)
    wait.observe(128, 0.0065)  # ResNet-50, two passes of 64
    assert wait.nap_s(128, 0.0002) == pytest.approx(0.0065 - 0.0002 - 0.001)
    assert wait.nap_s(128, 0.0050) == 0.0  # late already (0.5 ms left): no nap shorter than min_nap_s
    assert wait.nap_s(64, 0.0) == 0.0  # another size has its own expectation
    assert wait.naps == 1


def test_the_expectation_follows_a_faster_batch_at_once_and_a_slower_one_slowly() -> None:
    wait = GpuWait()
    wait.observe(64, 0.050)  # a first replay's outlier
    wait.observe(64, 0.0033)
    assert wait.expected_s[64] == pytest.approx(0.0033)  # at once
    wait.observe(64, 0.0043)
    assert wait.expected_s[64] == pytest.approx(0.0033 + 0.2 * 0.001)  # a fifth of the way up
    wait.observe(64, 0.100)  # a pause of the process: a tenth up at most
    assert wait.expected_s[64] == pytest.approx(1.1 * (0.0033 + 0.2 * 0.001))


def test_after_an_outlier_no_nap_outlasts_the_work() -> None:
    """Work of 3 ms, one wait of 60 ms (a pause): the naps that follow still end before the work does."""
    wait, true_s = GpuWait(), 0.003
    wait.observe("k", true_s)
    wait.observe("k", 0.060)
    for _ in range(20):
        nap = wait.nap_s("k", 0.0)
        assert nap < true_s
        wait.observe("k", max(true_s, nap + 0.0001))


@pytest.mark.parametrize("true_s,start_s", [(0.004, 0.012), (0.004, 0.0021), (0.0025, 0.004)])
def test_simulated_waits_converge_on_the_real_time(true_s: float, start_s: float) -> None:
    """A batch whose work takes ``true_s``: the wait ends at the later of the work's end and the nap's (plus a
    wake-up of 0.1 ms); from an expectation too high or too low, it comes within a wake-up of the truth."""
    wait, wake = GpuWait(), 0.0001
    wait.observe("k", start_s)
    for _ in range(60):
        nap = wait.nap_s("k", 0.0)
        wait.observe("k", max(true_s, nap + wake if nap else 0.0))
    assert true_s - 1e-6 <= wait.expected_s["k"] <= true_s + wake
    nap = wait.nap_s("k", 0.0)
    assert nap == pytest.approx(max(0.0, wait.expected_s["k"] - SPIN_TAIL_S)) or nap == 0.0
    assert nap + wake < true_s  # the nap never outlasts the work: the tail is spun, the answer is not late


@pytest.mark.parametrize(("n", "rows"), [(1, 1), (5, 8), (17, 32), (64, 64), (65, 65), (100, 112), (128, 128)])
def test_rows_run_counts_the_padded_rows_of_every_pass(n: int, rows: int) -> None:
    runner = SimpleNamespace(pass_rows=64, buckets=_buckets(64))
    assert ModelRunner._rows_run(runner, n) == rows  # type: ignore[arg-type]
