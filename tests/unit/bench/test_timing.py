"""The one timing primitive, driven by a fake clock: exact values, warm-up, inner loops, budget, sync points."""

from __future__ import annotations

import pytest

from gpukit.bench.timing import EventClock, HostClock, Samples, choose_inner, measure


class FakeTime:
    """A clock that advances only when a call 'runs': each call costs the next duration in ``costs``."""

    def __init__(self, costs: list[float]) -> None:
        self.now = 100.0
        self.costs = list(costs)
        self.calls: list[int] = []

    def __call__(self) -> float:
        return self.now

    def work(self, index: int) -> None:
        self.calls.append(index)
        self.now += self.costs.pop(0)


def test_measure_host_clock_exact_samples_after_warmup() -> None:
    fake = FakeTime([9.0, 9.0, 1.0, 2.0, 3.0])  # two warm-up calls are slow and must not be counted
    samples = measure(fake.work, HostClock(now=fake), repeats=3, warmup=2)
    assert samples.times_s == [1.0, 2.0, 3.0]
    assert (samples.median_s, samples.min_s, samples.max_s) == (2.0, 1.0, 3.0)
    assert samples.spread == pytest.approx(1.0)
    assert fake.calls == [0, 1, 2, 3, 4]  # the running index lets callers rotate buffers


def test_inner_calls_are_averaged_per_call() -> None:
    fake = FakeTime([1.0, 3.0, 2.0, 2.0])
    samples = measure(fake.work, HostClock(now=fake), repeats=2, warmup=0, inner=2)
    assert samples.times_s == [2.0, 2.0]
    assert samples.total_s == pytest.approx(8.0)


def test_budget_stops_early_but_keeps_three_samples() -> None:
    fake = FakeTime([5.0] * 10)
    samples = measure(fake.work, HostClock(now=fake), repeats=10, warmup=0, max_total_s=1.0)
    assert len(samples.times_s) == 3


def test_host_clock_syncs_before_each_reading() -> None:
    events: list[str] = []
    fake = FakeTime([1.0])
    clock = HostClock(sync=lambda: events.append("sync"), now=fake)
    clock.start()
    fake.work(0)
    assert clock.stop() == 1.0
    assert events == ["sync", "sync"]


def test_event_clock_records_and_waits_for_the_end_event() -> None:
    log: list[str] = []

    class Event:
        def __init__(self) -> None:
            self.t = 0.0

        def record(self) -> None:
            log.append("record")
            self.t = len(log) * 0.5

        def synchronize(self) -> None:
            log.append("sync")

    clock = EventClock(Event, lambda s, e: e.t - s.t)
    clock.start()
    assert clock.stop() == pytest.approx(0.5)
    assert log == ["record", "record", "sync"]


def test_choose_inner_and_bad_arguments() -> None:
    assert choose_inner(1e-5, 1e-3) == 100
    assert choose_inner(1.0, 1e-3) == 1
    assert choose_inner(1e-9, 1e-3, max_inner=50) == 50
    with pytest.raises(ValueError):
        measure(lambda i: None, HostClock(), repeats=0)
    assert Samples([1.0, 3.0]).median_s == 2.0


def test_lead_calls_run_before_each_start_and_are_not_timed() -> None:
    fake = FakeTime([7.0, 9.0, 1.0, 9.0, 2.0])  # warm-up, then (lead, timed) twice: the 9 s leads are not counted
    samples = measure(fake.work, HostClock(now=fake), repeats=2, warmup=1, lead=1)
    assert samples.times_s == [1.0, 2.0]
    assert fake.calls == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        measure(fake.work, HostClock(now=fake), lead=-1)
    assert EventClock.queues_ahead and not HostClock.queues_ahead


def test_min_total_keeps_sampling_past_repeats_until_enough_time_is_timed() -> None:
    fake = FakeTime([0.25] * 20)
    samples = measure(fake.work, HostClock(now=fake), repeats=2, warmup=0, min_total_s=1.0)
    assert samples.times_s == [0.25] * 4  # 2 asked for, 4 needed to time a whole second
    capped = FakeTime([0.25] * 20)
    capped_samples = measure(capped.work, HostClock(now=capped), repeats=2, warmup=0, min_total_s=10, max_total_s=0.6)
    assert len(capped_samples.times_s) == 3
    still = FakeTime([0.0] * 5)  # a clock that never advances cannot loop forever
    assert len(measure(still.work, HostClock(now=still), repeats=2, warmup=0, min_total_s=1.0).times_s) == 2


def test_pad_is_queued_first_and_covers_the_measured_issue_time() -> None:
    """Each sample: pad (long enough for the host to issue the lead and timed calls, as last measured), lead, start,
    the timed calls; the host's issue time per call is kept."""
    import time

    log: list[tuple[str, float]] = []

    def fn(index: int) -> None:
        time.sleep(0.002)  # the host's side of a launch
        log.append(("call", index))

    class Clock:
        queues_ahead = True

        def start(self) -> None:
            log.append(("start", 0))

        def stop(self) -> float:
            return 1e-3

    samples = measure(fn, Clock(), repeats=2, warmup=1, inner=2, lead=1, pad=lambda s: log.append(("pad", s)))
    kinds = [k for k, _ in log]
    assert kinds == ["call", "pad", "call", "start", "call", "call", "pad", "call", "start", "call", "call"]
    pads = [s for k, s in log if k == "pad"]
    assert all(3 * 0.002 * 1.5 <= s <= 0.05 for s in pads)  # (2 timed + 1 lead) x 2 ms x 1.5, under PAD_MAX_S
    assert len(samples.issue_s) == 2 and all(0.002 <= s < 0.05 for s in samples.issue_s)


def test_make_pad_calibrates_the_spin_rate_once() -> None:
    from gpukit.bench.timing import make_pad

    spins: list[int] = []

    class Clock:
        def start(self) -> None:
            self.n = len(spins)

        def stop(self) -> float:
            return spins[-1] * 2e-9  # the spin runs at 2 ns per unit

    pad = make_pad(spins.append, Clock(), 1000)
    assert spins == [1000, 1000]  # warm-up, then the timed calibration
    pad(1e-3)
    assert spins[-1] == 500_000  # 1 ms at 2 ns per unit
    with pytest.raises(ValueError):
        make_pad(lambda n: None, HostClock(now=lambda: 0.0), 10)
