"""One prediction, from body bytes to JSON, with its time split into stages. Shared by the one-process server and
by every HTTP worker of a several-process one; ``submitter`` is the local ``Batcher`` or the pipe to the model
process (both: ``submit(image, deadline, callback)`` and ``depth``).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gpukit.serve.batcher import Outcome, QueueFull
from gpukit.serve.config import ServeConfig
from gpukit.serve.decode import batch_decodable, decode_bytes
from gpukit.serve.metrics import Metrics
from gpukit.serve.model import ModelInfo, label_of
from gpukit.serve.request import RequestRejected

__all__ = ["Core", "Submitter"]


class Submitter(Protocol):
    @property
    def depth(self) -> int: ...

    def submit(self, image: np.ndarray | bytes, deadline: float, callback: Any) -> None: ...


@dataclass
class Core:
    config: ServeConfig
    metrics: Metrics
    info: ModelInfo | None = None
    submitter: Submitter | None = None
    draining: bool = False
    load_error: str | None = None
    in_flight: int = 0
    admitted: int = 0  # requests let in (each one is answered, also through a drain)
    answered: int = 0
    answered_ok: int = 0
    cancelled: int = 0
    api_key: str | None = None
    pool: ThreadPoolExecutor = field(init=False)

    def __post_init__(self) -> None:
        threads = self.config.decode_threads or min(8, max(2, os.cpu_count() or 1))
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="gpukit-decode")
        if self.config.api_key_env:
            self.api_key = os.environ.get(self.config.api_key_env) or None

    @property
    def ready(self) -> bool:
        if self.submitter is None or self.info is None or self.draining:
            return False
        return not getattr(self.submitter, "closed", False)  # a worker whose model process has gone is not ready

    def check_key(self, headers: Any) -> None:
        if self.api_key is None:
            return
        given = headers.get("x-api-key") or ""
        auth = headers.get("authorization") or ""
        if not given and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        if not hmac.compare_digest(given.encode(), self.api_key.encode()):  # constant time
            raise RequestRejected(401, "unauthorized", "missing or wrong API key (X-API-Key or Authorization: Bearer)")

    def admit(self) -> None:
        if self.draining:
            raise RequestRejected(503, "draining", "the server is shutting down; retry on another replica")
        if not self.ready:
            raise RequestRejected(
                503,
                "loading",
                "the model is still loading" if not self.load_error else f"the model failed to load: {self.load_error}",
            )
        if self.in_flight >= self.config.queue_size:
            raise RequestRejected(503, "overloaded", f"{self.in_flight} requests in flight; retry shortly")

    async def decode(self, data: bytes) -> np.ndarray | bytes:
        """Pixels, or (``--decode nvjpeg``) the JPEG bytes themselves after a header check, for the model process."""
        assert self.info is not None
        if self.config.decode == "nvjpeg" and batch_decodable(data, self.config.max_pixels):
            return data  # header only was read (tens of µs): the pixels are decoded with the batch, on the GPU
        loop = asyncio.get_running_loop()  # decoding runs on the pool: the event loop never waits on Pillow
        return await loop.run_in_executor(self.pool, decode_bytes, data, self.info.image_size, self.config.max_pixels)

    async def infer(self, image: np.ndarray | bytes, deadline: float) -> Outcome:
        """Queue one image and wait for its outcome or the deadline (504; the batcher then drops it unrun)."""
        assert self.submitter is not None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Outcome] = loop.create_future()

        def _done(outcome: Outcome) -> None:  # on the batcher's reply thread, or on this loop (a worker's pipe)
            try:
                here = asyncio.get_running_loop() is loop
            except RuntimeError:
                here = False
            if here:
                _set(fut, outcome)
            else:
                loop.call_soon_threadsafe(_set, fut, outcome)

        try:
            self.submitter.submit(image, deadline, _done)
        except QueueFull:
            raise RequestRejected(503, "queue_full", "the batch queue is full; retry shortly") from None
        timer = loop.call_later(max(0.0, deadline - time.monotonic()), _expire, fut)
        try:
            outcome = await fut
        finally:
            timer.cancel()
        if outcome.error == "timeout":
            raise RequestRejected(504, "timeout", f"not answered within {self.config.timeout_s:g} s")
        if outcome.error == "full":
            raise RequestRejected(503, "queue_full", "the batch queue is full; retry shortly")
        if outcome.error is not None and outcome.error.startswith("corrupt: "):
            raise RequestRejected(400, "corrupt", outcome.error.removeprefix("corrupt: "))
        if outcome.error is not None or outcome.probs is None:
            raise RuntimeError(f"the model failed: {outcome.error}")
        return outcome

    def encode(self, probs: list[float]) -> dict[str, Any]:
        assert self.info is not None
        label, probability = label_of(probs, self.info.classes)
        return {"label": label, "probability": probability, "scores": dict(zip(self.info.classes, probs, strict=True))}


def _set(fut: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not fut.done():
        fut.set_result(outcome)


def _expire(fut: asyncio.Future[Outcome]) -> None:
    if not fut.done():
        fut.set_result(Outcome(None, 0.0, 0.0, 0, "timeout"))


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
