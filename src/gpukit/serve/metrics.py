"""Prometheus metrics and the ``Server-Timing`` header.

One process: the metrics live in a registry of the app's own (two apps in one process never collide). Several HTTP
processes: ``PROMETHEUS_MULTIPROC_DIR`` is set before anything imports prometheus_client, every process (the HTTP
workers and the model process) writes its values to files there, and ``/metrics`` in any worker sums them all, so
the counts cover the whole server whichever worker answers the scrape.

A request's observations (its count, its latency, eight stages, the in-flight gauge) are gathered in memory and
written once per event-loop iteration (``Metrics.flush``, also before every exposition): in multiprocess mode each
prometheus_client update is a locked write to an mmap file, 17 of them a request, 16 µs of the HTTP worker's CPU on
the seed CNN's path (``benchmarks/serve-http-cpu_2026-12-05.md``).
"""

from __future__ import annotations

import asyncio
import os
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any

__all__ = ["STAGES", "Metrics", "server_timing"]

STAGES = ("read", "decode", "to_batch", "queue", "prep", "infer", "from_batch", "encode")
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def server_timing(stages: Mapping[str, float], total_s: float) -> str:
    """``read;dur=0.041, decode;dur=0.310, …, total;dur=1.502`` in milliseconds (the header's unit)."""
    parts = [f"{name};dur={stages[name] * 1000:.3f}" for name in STAGES if name in stages]
    parts.append(f"total;dur={total_s * 1000:.3f}")
    return ", ".join(parts)


class _Tally:
    """One histogram child's observations since the last flush: a count per bucket touched and their sum, written as
    one update each (prometheus_client has no bulk ``observe``, so this writes the child's ``_sum`` and ``_buckets``;
    ``bulk`` checks they are there and ``Metrics`` observes one by one where they are not). A tally that gathers its
    first value puts itself on ``dirty``, so a flush visits only those."""

    __slots__ = ("bounds", "child", "counts", "dirty", "total")

    def __init__(self, child: Any, dirty: list[_Tally]) -> None:
        self.child, self.dirty = child, dirty
        # ascending, the last +Inf; a value goes to the first ≥ it (none without the field: ``bulk`` is then False)
        self.bounds: list[float] = getattr(child, "_upper_bounds", [])
        self.counts: dict[int, int] = {}  # bucket index → values since the last write
        self.total = 0.0

    @staticmethod
    def bulk(child: Any) -> bool:
        buckets, bounds = getattr(child, "_buckets", None), getattr(child, "_upper_bounds", None)
        return hasattr(child, "_sum") and isinstance(bounds, list) and len(buckets or ()) == len(bounds)

    def add(self, seconds: float) -> None:
        counts = self.counts
        if not counts:
            self.dirty.append(self)
        i = bisect_left(self.bounds, seconds)
        counts[i] = counts.get(i, 0) + 1
        self.total += seconds

    def write(self) -> None:
        self.child._sum.inc(self.total)
        buckets = self.child._buckets
        for i, n in self.counts.items():
            buckets[i].inc(n)
        self.counts.clear()
        self.total = 0.0


class Metrics:
    def __init__(self, multiprocess: bool = False) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.multiprocess = multiprocess or bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry: Any = None if self.multiprocess else CollectorRegistry()
        reg = self.registry
        self.requests = Counter(
            "gpukit_requests", "HTTP requests by route and status", ["route", "status"], registry=reg
        )
        self.latency = Histogram(
            "gpukit_request_duration_seconds",
            "Time from request start to response, by route",
            ["route"],
            buckets=_LATENCY,
            registry=reg,
        )
        self.stage = Histogram(
            "gpukit_stage_duration_seconds",
            "Time per stage of a prediction (read, decode, to_batch, queue, prep, infer, from_batch, encode)",
            ["stage"],
            buckets=_LATENCY,
            registry=reg,
        )
        self.batch = Histogram("gpukit_batch_size", "Images per forward pass", buckets=_BATCH, registry=reg)
        self.images = Counter("gpukit_images", "Images run through the model", registry=reg)
        self.cancelled = Counter(
            "gpukit_queue_cancelled",
            "Requests taken out of the batch queue unrun because their client went away first",
            registry=reg,
        )
        self.queue_depth = Gauge(
            "gpukit_queue_depth", "Requests waiting for the model", registry=reg, multiprocess_mode="livemax"
        )
        self.in_flight = Gauge(
            "gpukit_in_flight", "Requests admitted and not yet answered", registry=reg, multiprocess_mode="livesum"
        )
        self.gpu_memory = Gauge(
            "gpukit_gpu_memory_bytes",
            "GPU memory allocated by the model process",
            registry=reg,
            multiprocess_mode="livemax",
        )
        self.engine = Gauge(
            "gpukit_engine_info",
            "The engine serving the model (1), its precision and its accuracy gate (passed, failed, reference)",
            ["engine", "precision", "gate"],
            registry=reg,
            multiprocess_mode="livemax",
        )
        self.engine_build = Gauge(
            "gpukit_engine_build_seconds",
            "Wall time of building, gating and choosing the engine at start",
            registry=reg,
            multiprocess_mode="livemax",
        )
        # what the requests since the last flush add (label look-ups cached: they cost more than the update)
        self._counts: dict[tuple[str, int], list[Any]] = {}  # (route, status) → [child, count]
        self._latencies: dict[str, _Tally] = {}
        self._dirty: list[_Tally] = []  # the tallies holding values since the last flush
        self._stages = {name: _Tally(self.stage.labels(name), self._dirty) for name in STAGES}
        self._in_flight: int | None = None  # the gauge's value to write
        self._due_on: asyncio.AbstractEventLoop | None = None  # the loop a flush is queued on
        self.bulk = _Tally.bulk(self._stages["read"].child)

    def observe(self, route: str, status: int, total_s: float, stages: Mapping[str, float] | None = None) -> None:
        """One answered request: counted, its latency and stages gathered until the next ``flush``."""
        key = (route, status)
        count = self._counts.get(key)
        if count is None:
            count = self._counts[key] = [self.requests.labels(route, str(status)), 0]
        count[1] += 1
        latency = self._latencies.get(route)
        if latency is None:
            latency = self._latencies[route] = _Tally(self.latency.labels(route), self._dirty)
        if not self.bulk:  # a prometheus_client without the fields _Tally writes: one update each, as it documents
            latency.child.observe(total_s)
            for name, seconds in (stages or {}).items():
                self._stages[name].child.observe(seconds)
        else:
            latency.add(total_s)
            for name, seconds in (stages or {}).items():
                self._stages[name].add(seconds)
        self._due()

    def set_in_flight(self, n: int) -> None:
        """Requests admitted and not yet answered in this process (written at the next ``flush``)."""
        self._in_flight = n
        self._due()

    def _due(self) -> None:
        """A flush at the end of this loop iteration (every request answered in it, in one write each); outside an
        event loop, now."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._due_on is not loop:  # none queued, or on a loop that has ended since (a test's asyncio.run)
            self._due_on = loop
            loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what was gathered to prometheus_client (its multiprocess files, where several processes serve)."""
        self._due_on = None
        for count in self._counts.values():
            if count[1]:
                count[0].inc(count[1])
                count[1] = 0
        for tally in self._dirty:
            tally.write()
        self._dirty.clear()
        if self._in_flight is not None:
            self.in_flight.set(self._in_flight)
            self._in_flight = None

    def observe_batch(self, size: int, gpu_memory: int | None, depth: int) -> None:
        self.batch.observe(size)
        self.images.inc(size)
        self.queue_depth.set(depth)
        if gpu_memory is not None:
            self.gpu_memory.set(gpu_memory)

    def observe_engine(self, engine: str, precision: str, gate: str, build_s: float) -> None:
        self.engine.labels(engine, precision, gate).set(1)
        self.engine_build.set(build_s)

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        self.flush()
        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
