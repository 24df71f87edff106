"""Prometheus metrics and the ``Server-Timing`` header.

One process: the metrics live in a registry of the app's own (two apps in one process never collide). Several HTTP
processes: ``PROMETHEUS_MULTIPROC_DIR`` is set before anything imports prometheus_client, every process (the HTTP
workers and the model process) writes its values to files there, and ``/metrics`` in any worker sums them all, so
the counts cover the whole server whichever worker answers the scrape.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["STAGES", "Metrics", "server_timing"]

STAGES = ("read", "decode", "queue", "prep", "infer", "encode")
_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def server_timing(stages: Mapping[str, float], total_s: float) -> str:
    """``read;dur=0.041, decode;dur=0.310, …, total;dur=1.502`` in milliseconds (the header's unit)."""
    parts = [f"{name};dur={stages[name] * 1000:.3f}" for name in STAGES if name in stages]
    parts.append(f"total;dur={total_s * 1000:.3f}")
    return ", ".join(parts)


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
            "Time per stage of a prediction (read, decode, queue, prep, infer, encode)",
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
        self._counters: dict[tuple[str, int], Any] = {}
        self._latencies: dict[str, Any] = {}
        self._stages = {name: self.stage.labels(name) for name in STAGES}

    def observe(self, route: str, status: int, total_s: float, stages: Mapping[str, float] | None = None) -> None:
        key = (route, status)
        counter = self._counters.get(key)
        if counter is None:  # label lookups cached: they cost more than the increment
            counter = self._counters[key] = self.requests.labels(route, str(status))
        counter.inc()
        latency = self._latencies.get(route)
        if latency is None:
            latency = self._latencies[route] = self.latency.labels(route)
        latency.observe(total_s)
        for name, seconds in (stages or {}).items():
            self._stages[name].observe(seconds)

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

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
