"""The HTTP worker's metrics are gathered in memory and written once per event-loop iteration: what a scrape reads
afterwards is what observing every request one by one through prometheus_client's own API would have given."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpukit.serve.metrics import _LATENCY, STAGES, Metrics, _Tally

_BOUNDS = [*_LATENCY, 0.0, 1e-9, 100.0]  # every bucket's edge (a value on it belongs to it), zero, past the last
_SECONDS = st.one_of(st.sampled_from(_BOUNDS), st.floats(0.0, 60.0, allow_nan=False))
_REQUEST = st.tuples(
    st.sampled_from(["/v1/predict", "/v1/predict/batch", "/readyz"]),
    st.sampled_from([200, 400, 499, 503]),
    _SECONDS,
    st.dictionaries(st.sampled_from(STAGES), _SECONDS),
)


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the registry but the creation times (they differ between two registries)."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in metrics.registry.collect():
        for s in family.samples:
            if not s.name.endswith("_created"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _reference(requests: list, in_flight: int) -> Metrics:
    """The same requests observed one at a time through prometheus_client's public API."""
    ref = Metrics()
    for route, status, total, stages in requests:
        ref.requests.labels(route, str(status)).inc()
        ref.latency.labels(route).observe(total)
        for name, seconds in stages.items():
            ref.stage.labels(name).observe(seconds)
    ref.in_flight.set(in_flight)
    return ref


def _equal(got: Metrics, want: Metrics) -> None:
    a, b = _samples(got), _samples(want)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-12, abs=1e-12), key


@settings(max_examples=60, deadline=None)
@given(st.lists(_REQUEST, max_size=40), st.integers(0, 5))
def test_a_loop_iteration_is_written_at_its_end_as_each_observation_would_be(requests, in_flight) -> None:
    metrics = Metrics()
    assert metrics.bulk  # the prometheus_client pinned by the serve extra has the fields _Tally writes
    before = _samples(metrics)

    async def answer_all() -> dict:
        for route, status, total, stages in requests:  # one loop iteration: no await between them
            metrics.observe(route, status, total, stages)
        metrics.set_in_flight(in_flight)
        during = _samples(metrics)
        await asyncio.sleep(0)  # the iteration ends: the flush runs
        return during

    during = asyncio.run(answer_all())
    # nothing written yet (a first label only creates its zero series): one write per touched value, at the end
    assert {k: v for k, v in during.items() if v} == {k: v for k, v in before.items() if v}
    _equal(metrics, _reference(requests, in_flight))


@settings(max_examples=30, deadline=None)
@given(st.lists(_REQUEST, max_size=20))
def test_outside_an_event_loop_and_without_the_bulk_fields_every_observation_is_written_at_once(requests) -> None:
    for bulk in (True, False):
        metrics = Metrics()
        metrics.bulk = bulk  # False: a prometheus_client whose histograms lack _sum/_buckets
        for route, status, total, stages in requests:
            metrics.observe(route, status, total, stages)
        metrics.set_in_flight(2)
        _equal(metrics, _reference(requests, 2))


def test_a_scrape_in_the_same_iteration_reads_what_was_observed_before_it() -> None:
    metrics = Metrics()

    async def observe_then_scrape() -> bytes:
        metrics.observe("/v1/predict", 200, 0.003, {"read": 0.001, "infer": 0.002})
        return metrics.exposition()[0]  # no await between: the exposition flushes first

    text = asyncio.run(observe_then_scrape()).decode()
    assert 'gpukit_requests_total{route="/v1/predict",status="200"} 1.0' in text
    assert 'gpukit_request_duration_seconds_bucket{le="0.005",route="/v1/predict"} 1.0' in text
    assert 'gpukit_request_duration_seconds_bucket{le="0.0025",route="/v1/predict"} 0.0' in text
    assert 'gpukit_stage_duration_seconds_count{stage="infer"} 1.0' in text


def test_the_bulk_check_refuses_a_histogram_without_the_fields() -> None:
    metrics = Metrics()
    assert _Tally.bulk(metrics.stage.labels("read"))
    assert not _Tally.bulk(object()) and _Tally(object(), []).bounds == []  # built all the same, never added to
    assert not _Tally.bulk(metrics.requests.labels("/x", "200"))  # a counter has no buckets


def test_a_loop_that_ends_with_a_flush_queued_does_not_stop_later_ones() -> None:
    metrics = Metrics()

    async def observe() -> None:
        metrics.observe("/v1/predict", 200, 0.003)

    def observe_and_stop() -> None:
        metrics.observe("/v1/predict", 200, 0.003)
        loop.stop()  # this iteration is the last: the flush queued for the next one never runs

    loop = asyncio.new_event_loop()
    loop.call_soon(observe_and_stop)
    loop.run_forever()
    loop.close()
    assert _samples(metrics)[("gpukit_requests_total", (("route", "/v1/predict"), ("status", "200")))] == 0
    asyncio.run(observe())  # a new loop: queued there, and run
    assert _samples(metrics)[("gpukit_requests_total", (("route", "/v1/predict"), ("status", "200")))] == 2
