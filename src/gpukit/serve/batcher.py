"""Dynamic batching with a bounded queue and deadlines, on one thread that owns the model.

Requests are queued with a deadline. The batching thread takes the oldest, then waits until ``max_batch`` are there
or ``max_wait_s`` has passed since that oldest one arrived, drops the ones whose deadline has passed (their callers
get a timeout and no model time is spent on them), stacks the rest into one uint8 batch and runs one forward pass.
``submit`` never blocks: a full queue raises ``QueueFull`` at once (the HTTP side answers 503 + Retry-After), so the
memory held is at most ``queue_size`` decoded images whatever the load. Callbacks run on the batching thread and
must only hand the result over (``loop.call_soon_threadsafe``, a pipe write).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["BatchStats", "Batcher", "Outcome", "QueueFull"]


class QueueFull(Exception):
    """The queue holds ``queue_size`` requests already."""


@dataclass
class Outcome:
    """What a request gets back: probabilities (None on timeout/error), and where its time went."""

    probs: list[float] | None
    queue_s: float  # submit → its batch started
    infer_s: float  # the batch's forward pass (shared by the batch)
    batch_size: int
    error: str | None = None  # "timeout" or the model's error message


@dataclass
class BatchStats:
    """Counters read by the CLI's once-a-second line and by the metrics."""

    batches: int = 0
    images: int = 0
    expired: int = 0
    busy_s: float = 0.0


class _Job:
    __slots__ = ("callback", "deadline", "image", "t_submit")

    def __init__(self, image: np.ndarray | bytes, deadline: float, callback: Callable[[Outcome], None]) -> None:
        self.image = image
        self.deadline = deadline
        self.callback = callback
        self.t_submit = time.monotonic()


class Batcher:
    def __init__(
        self,
        runner: Callable[[np.ndarray], np.ndarray],
        max_batch: int,
        max_wait_s: float,
        queue_size: int,
        on_batch: Callable[[int, float], None] | None = None,
    ) -> None:
        self.runner = runner
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self.on_batch = on_batch  # (batch size, seconds) after every forward pass, for the metrics
        self.stats = BatchStats()
        self._queue: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def depth(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="gpukit-batcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish what is queued, then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, image: np.ndarray | bytes, deadline: float, callback: Callable[[Outcome], None]) -> None:
        """Queue one decoded image (uint8 (3,S,S)) or JPEG bytes for the runner's ``run_items`` to decode with its
        batch; ``deadline`` is on ``time.monotonic()``'s clock."""
        with self._cond:
            if len(self._queue) >= self.queue_size:
                raise QueueFull
            self._queue.append(_Job(image, deadline, callback))
            if len(self._queue) == 1 or len(self._queue) >= self.max_batch:
                self._cond.notify()

    def _take(self) -> list[_Job] | None:
        with self._cond:
            while not self._queue:
                if self._stopping:
                    return None
                self._cond.wait()
            first = self._queue[0].t_submit
            while len(self._queue) < self.max_batch and not self._stopping:
                remaining = first + self.max_wait_s - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            n = min(self.max_batch, len(self._queue))
            return [self._queue.popleft() for _ in range(n)]

    def _loop(self) -> None:
        while (jobs := self._take()) is not None:
            now = time.monotonic()
            live = [j for j in jobs if j.deadline > now]
            for job in jobs:
                if job.deadline <= now:  # past its deadline: dropped without model time
                    self.stats.expired += 1
                    job.callback(Outcome(None, now - job.t_submit, 0.0, 0, "timeout"))
            if live:
                self._run(live, now)

    def _run(self, jobs: list[_Job], t0: float) -> None:
        items = [j.image for j in jobs]
        errors: list[str | None] = [None] * len(jobs)
        try:
            if all(isinstance(x, np.ndarray) for x in items):
                rows = self.runner(np.stack(items)).tolist()  # type: ignore[arg-type]
            else:  # JPEG bytes among them: the runner decodes them with the batch; a bad one fails only itself
                probs, errors = self.runner.run_items(items)  # type: ignore[attr-defined]
                rows = probs.tolist()
        except Exception as exc:  # the model failed: every request of the batch gets the error, the loop goes on
            rows = [None] * len(jobs)
            errors = [f"{type(exc).__name__}: {exc}"] * len(jobs)
        t1 = time.monotonic()
        self.stats.batches += 1
        self.stats.images += len(jobs)
        self.stats.busy_s += t1 - t0
        if self.on_batch is not None:
            self.on_batch(len(jobs), t1 - t0)
        for job, row, error in zip(jobs, rows, errors, strict=True):
            job.callback(Outcome(None if error else row, t0 - job.t_submit, t1 - t0, len(jobs), error))
