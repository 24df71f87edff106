"""One prediction, from body bytes to JSON, with its time split into stages. Shared by the one-process server and
by every HTTP worker of a several-process one; ``submitter`` is the local ``Batcher`` or the pipe to the model
process (both: ``submit(image, deadline, callback)`` and ``depth``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from gpukit.hardware.cpu import cpu_budget
from gpukit.serve.batcher import GONE, Outcome, QueueFull
from gpukit.serve.config import BATCH_DECODERS, ServeConfig
from gpukit.serve.decode import Frame, batch_decodable, finish, inline_frame, probe
from gpukit.serve.metrics import Metrics
from gpukit.serve.model import ModelInfo, label_of
from gpukit.serve.request import ClientGone, RequestRejected

try:  # a JSON encoder in C (the JSON stage 24.5-30.7 → 18.2-19.5 µs with the metrics: serve-http-cpu_2026-12-02.md)
    import orjson
except ImportError:  # the serve extra pins it; without it the standard library's encoder gives the same JSON
    orjson = None  # type: ignore[assignment]

__all__ = ["DECODE_QUEUE", "Budget", "Core", "Submitter", "dumps"]

DECODE_QUEUE = 1024  # images waiting for or in decoding, per HTTP process; more get 503 decode_busy


class Submitter(Protocol):
    @property
    def depth(self) -> int: ...

    def submit(self, image: np.ndarray | bytes, deadline: float, callback: Any) -> Any: ...

    def cancel(self, token: Any) -> object: ...


class Budget:
    """Bytes that decoding may hold at once (one HTTP process): taken from the header's size before any pixel is
    decoded, given back when the decode is done. ``take`` never waits: a full budget is a 503, not a queue."""

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = total_bytes
        self.used_bytes = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.used_bytes + n > self.total_bytes:
                return False
            self.used_bytes += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used_bytes -= n


@dataclass
class Core:
    config: ServeConfig
    metrics: Metrics
    info: ModelInfo | None = None
    submitter: Submitter | None = None
    draining: bool = False
    load_error: str | None = None
    load_hint: str | None = None  # the hint of a gpukit error that stopped the load (an engine that failed its gate)
    warming: bool = False  # loaded, running every batch size once (ready after that)
    model_gone: bool = False  # a worker's model process exited: nothing here can be served again
    # several HTTP processes: whether every one of them has accepted connections at the start (``SharedListener``);
    # until then this one is not ready, so that a load balancer's first connections do not all stay on the first
    # worker up (a worker replaced later does not count: the others stay ready)
    workers_up: Any = None
    in_flight: int = 0
    admitted: int = 0  # requests let in (each one is answered, also through a drain)
    answered: int = 0
    answered_ok: int = 0
    cancelled: int = 0  # admitted, then left by their client (499) before their answer
    decode_queued: int = 0  # images submitted to the decode pool and not finished
    device: str | None = None  # where the model runs (one process), for the start-up line
    warmup_s: float = 0.0
    api_key: str | None = None
    pool: ThreadPoolExecutor = field(init=False)
    budget: Budget = field(init=False)

    def __post_init__(self) -> None:
        threads = self.config.decode_threads or min(8, max(2, cpu_budget()))
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="gpukit-decode")
        self.budget = Budget(self.config.decode_memory_bytes)
        if self.config.api_key_env:
            self.api_key = os.environ.get(self.config.api_key_env) or None

    @property
    def ready(self) -> bool:
        if self.submitter is None or self.info is None or self.draining or self.model_gone:
            return False
        if self.workers_up is not None:
            if not self.workers_up():
                return False
            self.workers_up = None  # once: a worker replaced later leaves the others ready
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

    def check_open(self) -> None:
        """Before reading a body: refused at once while draining, loading, or after the model process died."""
        if self.draining:
            raise RequestRejected(503, "draining", "the server is shutting down; retry on another replica")
        if self.model_gone or getattr(self.submitter, "closed", False):
            raise RequestRejected(503, "model_gone", "the model process exited; this server is stopping")
        if not self.ready:
            if self.workers_up is not None and self.info is not None and self.submitter is not None:
                raise RequestRejected(503, "starting", "the server's other HTTP workers are still starting")
            raise RequestRejected(
                503,
                "loading",
                "the model is still loading" if not self.load_error else f"the model failed to load: {self.load_error}",
            )

    def admit(self) -> None:
        """Once the body is in: a place among the ``queue_size`` requests decoding, queued or running."""
        self.check_open()
        if self.in_flight >= self.config.queue_size:
            raise RequestRejected(503, "overloaded", f"{self.in_flight} requests in flight; retry shortly")

    def enter(self) -> None:
        """A request admitted: it holds a place until ``leave``."""
        self.admitted += 1
        self.in_flight += 1
        self.metrics.set_in_flight(self.in_flight)

    def leave(self, status: int) -> None:
        """An admitted request's end: answered with ``status``, or 499 when its client went away first."""
        self.answered += status != 499
        self.cancelled += status == 499
        self.answered_ok += status == 200
        self.in_flight -= 1
        self.metrics.set_in_flight(self.in_flight)

    async def decode_all(self, files: list[bytes], deadline: float) -> list[np.ndarray | bytes]:
        """Every image of a request, decoded within the request's deadline and decode budgets.

        A decoder of the model process (``--decode nvjpeg``, ``nvimgcodec``): a JPEG it can decode goes there as
        bytes after a header check on the loop (tens of µs). The one image of a request that is a small sequential
        JPEG (``decode.inline_frame``: at most 128×128 pixels and 64 KiB, for a model input of at most 256 px;
        about 0.1 ms to decode) is decoded on the loop itself, under the same budgets. Everything else runs on the
        pool (the event loop never waits on a costly image), bounded three ways: at most ``DECODE_QUEUE`` images
        waiting (else 503), the decoded bytes of one request at most half of ``--decode-memory-mb`` (else 413), all
        requests together at most all of it (else 503). Past the deadline the request gets 504 and its images not yet
        started are dropped."""
        assert self.info is not None
        out: list[np.ndarray | bytes | None] = [None] * len(files)
        todo = []
        for i, data in enumerate(files):
            if self.config.decode in BATCH_DECODERS and batch_decodable(data, self.config.max_pixels):
                out[i] = data
            elif len(files) == 1 and (frame := inline_frame(data, self.info.image_size, self.config.max_pixels)):
                out[i] = _DecodeJob(self, deadline).decode(data, frame)  # on the loop: cheaper than a thread hop
            else:
                todo.append(i)
        if todo:
            if self.decode_queued + len(todo) > DECODE_QUEUE:
                raise RequestRejected(503, "decode_busy", f"{self.decode_queued} images are waiting to be decoded")
            job = _DecodeJob(self, deadline)
            for i, image in zip(todo, await job.run([files[i] for i in todo]), strict=True):
                out[i] = image
        return out  # type: ignore[return-value]

    async def infer(self, image: np.ndarray | bytes, deadline: float, gone: list[Any] | None = None) -> Outcome:
        """Queue one image and wait for its outcome or the deadline (504; the batcher then drops it unrun).

        ``gone``: the connection's list of callbacks run when its client disconnects (``gpukit.serve.protocol``);
        this request's one takes it out of the queue (unrun, if its batch was not formed yet) and raises
        ``ClientGone``."""
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
            token = self.submitter.submit(image, deadline, _done)
        except QueueFull:
            raise RequestRejected(503, "queue_full", "the batch queue is full; retry shortly") from None
        except OSError:  # a worker's pipe to a model process that has gone
            self.model_gone = True
            raise RequestRejected(503, "model_gone", "the model process exited; this server is stopping") from None
        timer = loop.call_later(max(0.0, deadline - time.monotonic()), _expire, fut)
        if gone is not None:
            gone.append(functools.partial(self._client_gone, fut, token))
        try:
            outcome = await fut
        finally:
            timer.cancel()
        if outcome.error == _CLIENT_GONE:
            raise ClientGone
        if outcome.error == "timeout":
            raise RequestRejected(504, "timeout", f"not answered within {self.config.timeout_s:g} s")
        if outcome.error == "full":
            raise RequestRejected(503, "queue_full", "the batch queue is full; retry shortly")
        if outcome.error is not None and outcome.error.startswith("corrupt: "):
            raise RequestRejected(400, "corrupt", outcome.error.removeprefix("corrupt: "))
        if outcome.error == GONE:
            raise RequestRejected(503, "model_gone", "the model process exited; this server is stopping")
        if outcome.error is not None or outcome.probs is None:
            raise RuntimeError(f"the model failed: {outcome.error}")
        return outcome

    def _client_gone(self, fut: asyncio.Future[Outcome], token: Any) -> None:
        """On the loop, when the connection closed: the request leaves the queue (if still there) and ends now."""
        if fut.done():
            return
        fut.set_result(Outcome(None, 0.0, 0.0, 0, _CLIENT_GONE))
        with contextlib.suppress(OSError):  # the model process is gone too: nothing to cancel
            self.submitter.cancel(token)  # type: ignore[union-attr]

    def encode(self, row: np.ndarray | None) -> dict[str, Any]:
        """One request's answer, from its float32 row of probabilities (an ``Outcome.probs`` that ``infer`` let by)."""
        assert self.info is not None and row is not None
        probs = row.tolist()
        label, probability = label_of(probs, self.info.classes)
        return {"label": label, "probability": probability, "scores": dict(zip(self.info.classes, probs, strict=True))}


def _set(fut: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not fut.done():
        fut.set_result(outcome)


def _expire(fut: asyncio.Future[Outcome]) -> None:
    if not fut.done():
        fut.set_result(Outcome(None, 0.0, 0.0, 0, "timeout"))


_CLIENT_GONE = "client_gone"


def dumps(obj: Any) -> bytes:
    """Compact JSON (orjson when installed)."""
    if orjson is not None:
        return orjson.dumps(obj)  # type: ignore[no-any-return]
    return json.dumps(obj, separators=(",", ":")).encode()


class _DecodeJob:
    """The images of one request on the decode pool, with the request's share of the budget."""

    def __init__(self, core: Core, deadline: float) -> None:
        self.core, self.deadline = core, deadline
        self.size = core.info.image_size if core.info else 0
        self.request_bytes = 0
        self.request_limit = core.budget.total_bytes // 2
        self.stopped = False  # the request failed or timed out: images not started are skipped
        self._lock = threading.Lock()

    async def run(self, files: list[bytes]) -> list[np.ndarray]:
        """Decode on at most ``pool threads`` jobs, each taking every k-th image in turn: a batch of 256 is a few
        futures, not 256, and the first refused image stops the others at their next image."""
        core, loop = self.core, asyncio.get_running_loop()
        k = min(len(files), core.pool._max_workers)
        futures = [loop.run_in_executor(core.pool, self.decode_slice, files[i::k]) for i in range(k)]
        core.decode_queued += len(files)
        for i, f in enumerate(futures):
            f.add_done_callback(functools.partial(self._done, len(files[i::k])))
        try:
            async with asyncio.timeout(max(0.0, self.deadline - time.monotonic())):
                # one image (the common case): its future itself, since gather costs one more loop iteration
                slices = [await futures[0]] if k == 1 else await asyncio.gather(*futures)
        except TimeoutError:
            raise RequestRejected(504, "timeout", f"not decoded within {core.config.timeout_s:g} s") from None
        finally:
            self.stopped = True
            for f in futures:
                f.cancel()  # those not started leave the pool's queue
        out: list[np.ndarray] = [None] * len(files)  # type: ignore[list-item]
        for i, part in enumerate(slices):
            out[i::k] = part
        return out

    def _done(self, images: int, future: asyncio.Future[Any]) -> None:
        self.core.decode_queued -= images
        if not future.cancelled():
            future.exception()  # retrieved: a second failure of one request is not logged as unhandled

    def decode_slice(self, datas: list[bytes]) -> list[np.ndarray]:
        return [self.decode(d) for d in datas]

    def decode(self, data: bytes, frame: Frame | None = None) -> np.ndarray:
        """On a pool thread (or the loop, ``inline_frame``, whose ``frame`` is not read twice): header, budgets,
        pixels (a plain JPEG through simplejpeg, with Pillow's pixels: ``decode.probe``)."""
        if self.stopped or time.monotonic() > self.deadline:
            raise RequestRejected(504, "timeout", "the request ended before this image was decoded")
        p = probe(data, self.size, self.core.config.max_pixels, frame=frame)
        with self._lock:
            self.request_bytes += p.decoded_bytes
            over = self.request_bytes > self.request_limit
        if over:
            p.close()
            raise RequestRejected(
                413,
                "too_many_pixels",
                f"the images of this request decode to over {self.request_limit / 2**20:.0f} MiB (the per-request "
                f"budget, half of --decode-memory-mb)",
            )
        if not self.core.budget.take(p.decoded_bytes):
            p.close()
            raise RequestRejected(503, "decode_busy", "the server's decode memory budget is in use; retry shortly")
        try:
            return finish(p, data, self.size)
        finally:
            self.core.budget.give(p.decoded_bytes)
