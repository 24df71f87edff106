"""The ONE timing primitive of gpukit: every number `gpukit bench` prints is measured through :func:`measure`.

A :class:`Clock` times one region: ``start()`` then ``stop() -> seconds``. Two kinds exist:

* :class:`HostClock` — ``time.perf_counter`` around the region, with a ``sync`` callable run before reading the
  clock at both ends (for the CPU there is nothing to wait for; a GPU backend without events passes its device
  synchronize, so the host clock never measures only the launch).
* :class:`EventClock` — a pair of device events (CUDA events from torch, cupy or numba) recorded on the stream
  around the region; the elapsed time is the device's own, not the launch's.

:func:`measure` warms up, then takes ``repeats`` samples; each sample runs the function ``inner`` times back to back
(so a tiny kernel is timed well above timer resolution and launch gaps) and records the mean per call. The function
receives a running call index so it can rotate input buffers and keep small inputs from sitting in cache.

Time the device, not the launch (MEASURING.md rule 4). With an event clock the start event is only queued, so
whatever the device is still running when the host reaches ``clock.start()`` keeps it busy while the timed calls
are launched. Two things provide that:

* ``lead`` untimed calls of the function itself before each sample. Enough when one call runs longer on the device
  than the host takes to launch the next (a 1 GiB add: 0.74 ms against ~20 µs).
* a ``pad``: a spin kernel queued first, lasting a little longer than the host took to issue one sample's calls the
  last time (measured: ``Samples.issue_s``). Needed for kernels shorter than their launch — a 5 µs kernel launched
  from Python every 30 µs would otherwise be timed at the launch rate.

Without either, the start event fires on an idle stream and each sample also counts host launches: tens of
microseconds from Python, several per cent of a 1 ms sample and most of a microsecond kernel's. A host clock gains
nothing from them: it synchronizes before it starts. The host's own cost per call is not lost: ``issue_s`` keeps it,
and the harness reports it as the row's launch time (a row whose launch exceeds its kernel time is launch-bound:
called one by one from Python it runs at the launch rate).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "PAD_MAX_S",
    "Clock",
    "EventClock",
    "Guard",
    "HostClock",
    "Samples",
    "StopRule",
    "choose_inner",
    "make_pad",
    "measure",
    "rel_mad",
]

PAD_MAX_S = 0.05  # the longest pad queued before one sample (a host that needs longer to issue it is launch-bound)


class Clock(Protocol):
    """Times one region. ``stop()`` returns the seconds since the matching ``start()``.

    ``queues_ahead`` tells whether ``start()`` returns without waiting for the device (then calls issued just before
    it can keep the device busy while the timed calls are launched).
    """

    queues_ahead: bool

    def start(self) -> None: ...

    def stop(self) -> float: ...


class HostClock:
    """Host wall clock; ``sync`` runs before each reading (a device synchronize for a GPU backend, else nothing)."""

    queues_ahead = False  # start() waits for the device, so calls queued before it cannot hide a launch

    def __init__(self, sync: Callable[[], None] | None = None, now: Callable[[], float] = time.perf_counter) -> None:
        self._sync = sync or (lambda: None)
        self._now = now
        self._t0 = 0.0

    def start(self) -> None:
        self._sync()  # sync: work queued before the region must not be counted in it
        self._t0 = self._now()

    def stop(self) -> float:
        self._sync()  # sync: the region's work must have finished before we read the clock
        return self._now() - self._t0


class EventClock:
    """Device events around the region.

    ``make_event()`` returns an event with ``record()`` and ``synchronize()`` (adapt numba/cupy events to that);
    ``elapsed(start, end)`` returns the seconds between two recorded events.
    """

    queues_ahead = True  # start() only queues an event: work queued before it keeps the device busy meanwhile

    def __init__(self, make_event: Callable[[], Any], elapsed: Callable[[Any, Any], float]) -> None:
        self._make = make_event
        self._elapsed = elapsed
        self._start: Any = None

    def start(self) -> None:
        self._start = self._make()
        self._start.record()  # no sync: the event is queued on the stream in order with the kernels

    def stop(self) -> float:
        end = self._make()
        end.record()
        end.synchronize()  # sync: wait for the end event so the elapsed time can be read
        return self._elapsed(self._start, end)


def rel_mad(times_s: list[float]) -> float:
    """Median absolute deviation / median: the robust relative spread noise-based stopping watches (one slow
    outlier moves it little, unlike the standard deviation)."""
    if not times_s:
        return math.inf
    med = statistics.median(times_s)
    if med <= 0:
        return math.inf
    return statistics.median(abs(t - med) for t in times_s) / med


@dataclass(frozen=True)
class StopRule:
    """When :func:`measure` stops sampling (noise-based stopping, as nvbench does it).

    At least ``min_samples`` clean samples and ``min_time_s`` seconds of timed calls; then it stops as soon as the
    relative spread (:func:`rel_mad`) is at most ``target`` (``stopped_by="noise"``), or when ``max_time_s`` of wall
    time has passed since sampling began (``"time"``: the row never settled), or at ``max_samples`` (``"count"``).
    ``target`` 0 takes exactly ``min_samples`` (``"count"``)."""

    target: float = 0.005
    min_samples: int = 10
    min_time_s: float = 0.0
    max_time_s: float | None = None
    max_samples: int | None = None


class Guard(Protocol):
    """Watches the conditions of each sample: ``before()`` right before it, ``after()`` right after it returns
    why the sample must be discarded (a throttled GPU), or None to keep it."""

    def before(self) -> None: ...

    def after(self) -> str | None: ...


@dataclass
class Samples:
    """Per-call seconds of each kept sample (each the mean of ``inner`` back-to-back calls).

    ``stopped_by`` says what ended sampling: ``noise`` (the spread reached the target), ``time`` (the time budget
    ended first: not settled), ``count`` (a fixed number of samples). ``discarded`` counts the samples a guard threw
    away, by reason; they are not in ``times_s``."""

    times_s: list[float] = field(default_factory=list)
    inner: int = 1
    warmup: int = 0
    issue_s: list[float] = field(default_factory=list)  # host seconds per call to issue each sample's calls
    stopped_by: str = "count"
    discarded: dict[str, int] = field(default_factory=dict)

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        return max(self.times_s)

    @property
    def total_s(self) -> float:
        """Seconds spent in timed calls (samples × inner × per-call time)."""
        return sum(self.times_s) * self.inner

    @property
    def spread(self) -> float:
        """(max − min) / median: the run-to-run noise a comparison has to beat."""
        med = self.median_s
        return (self.max_s - self.min_s) / med if med > 0 else math.inf

    @property
    def rel_mad(self) -> float:
        return rel_mad(self.times_s)


def choose_inner(first_call_s: float, target_sample_s: float = 1e-3, max_inner: int = 1000) -> int:
    """How many back-to-back calls make one sample last about ``target_sample_s``."""
    if first_call_s <= 0:
        return max_inner
    return max(1, min(max_inner, math.ceil(target_sample_s / first_call_s)))


def make_pad(spin: Callable[[int], None], clock: Clock, units: int) -> Callable[[float], None]:
    """A pad for :func:`measure`: ``pad(seconds)`` queues a spin of about that long.

    ``spin(n)`` queues device work that lasts in proportion to ``n`` (a clock64 loop); ``units`` is a count that
    lasts about a millisecond. The rate is measured once here with ``clock`` after a warm-up spin."""
    spin(units)  # compile / load, and bring the clocks up
    clock.start()
    spin(units)
    per_unit = clock.stop() / units
    if not per_unit > 0:
        raise ValueError(f"the spin kernel did not take measurable time ({per_unit!r} s per unit)")

    def pad(seconds: float) -> None:
        spin(max(1, math.ceil(seconds / per_unit)))

    return pad


def measure(
    fn: Callable[[int], None],
    clock: Clock,
    *,
    repeats: int = 10,
    warmup: int = 2,
    inner: int = 1,
    max_total_s: float | None = None,
    lead: int = 0,
    min_total_s: float = 0.0,
    pad: Callable[[float], None] | None = None,
    stop: StopRule | None = None,
    guard: Guard | None = None,
    flush: Callable[[], None] | None = None,
    after_first: Callable[[], None] | None = None,
) -> Samples:
    """Warm up, then time samples of ``inner`` calls of ``fn(call_index)`` until ``stop`` says enough (without a
    rule: exactly ``repeats`` samples).

    ``lead`` calls run untimed before each sample's ``clock.start()`` (see the module docstring; use it with a clock
    whose ``queues_ahead`` is true), and so does ``pad(seconds)``, queued first, long enough to cover issuing the lead
    and timed calls as last measured (warm-up calls give the first estimate). ``flush()`` runs untimed before each
    sample, after the pad (a cold measurement evicts the cache there; give it ``lead=0``). ``guard`` is asked around
    each sample whether to keep it; ``after_first()`` runs once, untimed, after the first kept sample (the harness
    checks the output there: a result written late, by a thread, is caught however long sampling lasts).
    ``min_total_s`` keeps sampling until the timed calls add up to that many seconds
    (an energy reading needs about a second of work). ``max_total_s`` stops sampling early (keeping at least three
    samples) when a slow implementation would pass its time budget; the samples taken so far are returned.
    """
    if repeats < 1 or inner < 1 or lead < 0:
        raise ValueError("repeats and inner must be >= 1, lead >= 0")
    rule = stop or StopRule(target=0.0, min_samples=repeats)
    index = 0
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn(index)
        index += 1
    samples = Samples(inner=inner, warmup=warmup)
    issue = (time.perf_counter() - t0) / warmup if warmup else 0.0  # host seconds to issue one call
    spent = 0.0
    began = time.perf_counter()
    while True:
        if guard is not None:
            guard.before()
        if pad is not None and issue > 0:
            pad(min(PAD_MAX_S, issue * (inner + lead) * 1.5 + 20e-6))  # queued, not waited for
        if flush is not None:
            flush()  # untimed: queued (or run) before the clock starts
        for _ in range(lead):  # queued, not waited for: the device is still running them at clock.start()
            fn(index)
            index += 1
        clock.start()
        t1 = time.perf_counter()
        for _ in range(inner):
            fn(index)
            index += 1
        issued = (time.perf_counter() - t1) / inner
        elapsed = clock.stop()
        why = guard.after() if guard is not None else None
        spent += elapsed
        issue = max(issue, issued)
        if why is not None:
            samples.discarded[why] = samples.discarded.get(why, 0) + 1
        else:
            samples.issue_s.append(issued)
            samples.times_s.append(elapsed / inner)
            if after_first is not None and len(samples.times_s) == 1:
                after_first()
        if ended := _ended(samples, rule, spent, time.perf_counter() - began, max_total_s, min_total_s, elapsed):
            samples.stopped_by = ended
            return samples


def _ended(
    samples: Samples,
    rule: StopRule,
    spent: float,
    wall: float,
    max_total_s: float | None,
    min_total_s: float,
    elapsed: float,
) -> str | None:
    """What ends sampling now (``noise``, ``time``, ``count``), or None to take another sample.

    The noise budget (``rule.max_time_s``) ends a row only once it has its minimum samples and time (or while its
    samples are being discarded: a throttled GPU must not keep it sampling); ``max_total_s``, the row's whole time
    budget, ends it once three samples are kept."""
    n = len(samples.times_s)
    if max_total_s is not None and spent > max_total_s and (n >= 3 or samples.discarded):
        return "time"
    noise_out = rule.max_time_s is not None and wall >= rule.max_time_s
    if noise_out and samples.discarded:
        return "time"
    if rule.max_samples is not None and n >= rule.max_samples and spent >= min_total_s:
        return "count"
    if n < rule.min_samples or spent < max(rule.min_time_s, min_total_s):
        if elapsed <= 0 and n >= rule.min_samples:  # a clock that does not advance never reaches a minimum time
            return "count"
        return None
    if rule.target <= 0:
        return "count"
    if samples.rel_mad <= rule.target:
        return "noise"
    if noise_out:
        return "time"
    if rule.max_time_s is None and max_total_s is None:  # nothing else would end it
        return "count"
    return None
