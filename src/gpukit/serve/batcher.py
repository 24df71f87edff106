"""Dynamic batching with a bounded queue and deadlines, as a two-stage pipeline that owns the model.

Requests are queued with a deadline. The preparing thread takes the oldest, then waits until ``max_batch`` are there
or ``max_wait_s`` has passed since that oldest one arrived (with ``align``, more than ``align`` waiting are taken as a
multiple of it: whole forward passes, no padded rows while others wait), drops the ones whose deadline has passed
(their callers get a timeout and no model time is spent on them), and has the runner ``prepare`` the rest (decode,
resize, stage on the device). It hands the prepared batch to the executing thread, which runs it (``execute``: one
forward pass) and answers the callers. The hand-off holds one batch: batch N+1 is prepared while batch N runs, and the
preparing thread takes the next batch only once the executor has taken the last one, so at most two batches are out of
the queue at once (bounded memory) and a batch is gathered as late as possible. The executor checks the deadlines
again: a batch whose requests all expired while it waited is dropped unrun; a row that expired inside a running batch
is answered as a timeout. A third thread fires the callbacks, so that the executor starts the next batch at once (in
the HTTP server each callback is a pipe write; on the executor, the GPU waited for all of them). Batches run, and
their callbacks fire, in the order they were taken.

A runner is either an object with ``prepare(items) -> staged`` and ``execute(staged) -> (probs, errors)``
(``ModelRunner``), or a plain callable on a stacked uint8 batch (prepared by ``np.stack``).
``submit`` never blocks: a full queue raises ``QueueFull`` at once (the HTTP side answers 503 + Retry-After), so the
memory held is at most ``queue_size`` decoded images whatever the load. Every callback runs on the replying thread
and must only hand the result over (``loop.call_soon_threadsafe``, a record for a pipe); ``after_replies`` run there
after each batch's callbacks (the pipes write what the batch queued for them).
``submit`` returns the request's handle; ``cancel(handle)`` takes a request whose client went away out of the queue
if its batch has not been formed yet (it is then never run and never answered; ``on_cancel`` counts it).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GONE", "BatchStats", "Batcher", "Outcome", "QueueFull"]

GONE = "the model process exited"  # the error of every request waiting on a model process that died


class QueueFull(Exception):
    """The queue holds ``queue_size`` requests already."""


@dataclass
class Outcome:
    """What a request gets back: probabilities (None on timeout/error), and where its time went.

    ``probs`` is the request's float32 row of the batch's result (a view of one copy of it per batch), not a list:
    the model process sends its bytes down the pipe as they are, and only the HTTP worker that writes the JSON makes
    Python floats of them (``Core.encode``). Lists made per batch in the model process, and arrays made back of them
    per reply, held its GIL for about 3 ms of every ResNet-50 batch of 78 (1,000 classes) on a 2-core CPU VM, against
    0.03 ms for views (benchmarks/serve-rows_2026-12-05.md)."""

    probs: np.ndarray | None
    queue_s: float  # waiting: submit → its batch's preparation started, plus prepared → the executor took it
    infer_s: float  # the batch's execution: copy into the model's input, forward pass, results to the host
    batch_size: int
    error: str | None = None  # "timeout" or the model's error message
    prep_s: float = 0.0  # the batch's preparation: decode, resize, staging on the device (shared by the batch)
    # when the batcher queued it, on ``time.monotonic()``'s clock (CLOCK_MONOTONIC, one for every process of a Linux
    # host): the HTTP side tells the way to the batcher from the way back (Server-Timing's to_batch, from_batch)
    t_submit: float = 0.0


@dataclass
class BatchStats:
    """Counters read by the CLI's once-a-second line and by the metrics."""

    batches: int = 0
    images: int = 0
    expired: int = 0
    cancelled: int = 0  # taken out of the queue unrun: their clients went away
    busy_s: float = 0.0  # executing
    prep_s: float = 0.0  # preparing (overlaps busy_s)


class _Job:
    __slots__ = ("callback", "deadline", "image", "t_submit")

    def __init__(self, image: np.ndarray | bytes, deadline: float, callback: Callable[[Outcome], None]) -> None:
        self.image: np.ndarray | bytes | None = image
        self.deadline = deadline
        self.callback = callback
        self.t_submit = time.monotonic()


class _Prepared:
    __slots__ = ("errors", "jobs", "staged", "t_prep", "t_ready")

    def __init__(self, jobs: list[_Job], staged: Any, errors: list[str | None], t_prep: float) -> None:
        self.jobs = jobs
        self.staged = staged  # None when the whole preparation failed (errors say why)
        self.errors = errors
        self.t_prep = t_prep  # preparation started
        self.t_ready = time.monotonic()


class _Stack:
    """A plain callable on a stacked uint8 batch, seen as prepare/execute."""

    def __init__(self, runner: Callable[[np.ndarray], np.ndarray]) -> None:
        self.runner = runner

    def prepare(self, items: list[np.ndarray | bytes]) -> np.ndarray:
        return np.stack(items)  # type: ignore[arg-type]

    def execute(self, batch: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
        return self.runner(batch), [None] * len(batch)


class Batcher:
    def __init__(
        self,
        runner: Any,
        max_batch: int,
        max_wait_s: float,
        queue_size: int,
        on_batch: Callable[[int, float], None] | None = None,
        align: int | None = None,
        on_cancel: Callable[[], None] | None = None,
    ) -> None:
        self.runner = runner if hasattr(runner, "prepare") and hasattr(runner, "execute") else _Stack(runner)
        self.max_batch = max_batch
        # More than ``align`` waiting: take a multiple of it and leave the rest first in line, so that no forward
        # pass runs padded rows while requests wait (ModelRunner.pass_rows on CUDA: 64).
        self.align = align
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self.on_batch = on_batch  # (batch size, seconds) after every forward pass, for the metrics
        self.on_cancel = on_cancel  # after every request taken out of the queue by ``cancel``
        self.stats = BatchStats()
        self._queue: deque[_Job] = deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._handoff: _Prepared | None = None  # the one prepared batch waiting for the executor
        self._handoff_done = False  # the preparing thread has stopped: nothing more will be handed off
        self._hand = threading.Condition()
        self._replies: queue.SimpleQueue[list[tuple[_Job, Outcome]] | None] = queue.SimpleQueue()
        # run on the replying thread after each batch's callbacks (a pipe sends what they queued, in one write)
        self.after_replies: list[Callable[[], None]] = []
        self._threads: list[threading.Thread] = []

    @property
    def depth(self) -> int:
        return len(self._queue)

    def start(self) -> None:
        self._threads = [
            threading.Thread(target=self._prepare_loop, name="gpukit-batcher-prepare", daemon=True),
            threading.Thread(target=self._execute_loop, name="gpukit-batcher-execute", daemon=True),
            threading.Thread(target=self._reply_loop, name="gpukit-batcher-reply", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish what is queued (prepared, run and answered), then stop the three threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        end = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))

    def submit(self, image: np.ndarray | bytes, deadline: float, callback: Callable[[Outcome], None]) -> _Job:
        """Queue one decoded image (uint8 (3,S,S)) or JPEG bytes for the runner to decode with its batch;
        ``deadline`` is on ``time.monotonic()``'s clock. Returns the handle ``cancel`` takes."""
        job = _Job(image, deadline, callback)
        with self._cond:
            if len(self._queue) >= self.queue_size:
                raise QueueFull
            self._queue.append(job)
            if len(self._queue) == 1 or len(self._queue) >= self.max_batch:
                self._cond.notify()
        return job

    def cancel(self, job: _Job) -> bool:
        """Take ``job`` out of the queue if no batch has taken it yet (True: it will never run nor be answered)."""
        with self._cond:
            try:
                self._queue.remove(job)
            except ValueError:  # already in a batch (or answered): it runs, its answer is discarded by the caller
                return False
            self.stats.cancelled += 1
        job.image = None
        if self.on_cancel is not None:
            self.on_cancel()
        return True

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
            if self.align and n > self.align:
                n -= n % self.align
            return [self._queue.popleft() for _ in range(n)]

    def _live(self, jobs: list[_Job]) -> list[_Job]:
        """The jobs still within their deadline; the others are answered as timeouts (through the replying thread,
        behind the answers of the batches before them)."""
        now = time.monotonic()
        expired = [j for j in jobs if j.deadline <= now]
        if expired:
            self.stats.expired += len(expired)
            self._replies.put([(j, Outcome(None, now - j.t_submit, 0.0, 0, "timeout")) for j in expired])
        return [j for j in jobs if j.deadline > now]

    def _prepare_loop(self) -> None:
        try:
            while True:
                with self._hand:  # take a new batch only once the executor has taken the last one
                    while self._handoff is not None:
                        self._hand.wait()
                jobs = self._take()
                if jobs is None:
                    return
                live = self._live(jobs)
                if not live:
                    continue
                t0 = time.monotonic()
                try:
                    staged = self.runner.prepare([j.image for j in live])  # type: ignore[misc]  # None only once run
                    errors: list[str | None] = list(getattr(staged, "errors", None) or [None] * len(live))
                except Exception as exc:  # preparation failed as a whole: this batch fails, the next one is fresh
                    staged, errors = None, [f"{type(exc).__name__}: {exc}"] * len(live)
                self.stats.prep_s += time.monotonic() - t0
                with self._hand:
                    self._handoff = _Prepared(live, staged, errors, t0)
                    self._hand.notify_all()
        finally:
            with self._hand:
                self._handoff_done = True
                self._hand.notify_all()

    def _execute_loop(self) -> None:
        try:
            while True:
                with self._hand:
                    while self._handoff is None and not self._handoff_done:
                        self._hand.wait()
                    batch, self._handoff = self._handoff, None
                    self._hand.notify_all()
                if batch is None:
                    return
                self._execute(batch)
        finally:
            self._replies.put(None)  # the replying thread stops after the last batch's callbacks

    def _reply_loop(self) -> None:
        while (answers := self._replies.get()) is not None:
            for job, outcome in answers:
                try:
                    job.callback(outcome)
                except Exception:  # a caller's callback failed: the others, and later batches, are still answered
                    continue
            for flush in list(self.after_replies):
                try:
                    flush()
                except Exception:  # one pipe's failure is its own (its reader sees the end)
                    continue

    def _execute(self, batch: _Prepared) -> None:
        t0 = time.monotonic()
        jobs, errors = batch.jobs, batch.errors
        if not any(j.deadline > t0 for j in jobs):  # all expired while waiting for the executor: dropped unrun
            self._live(jobs)
            return
        rows: list[Any] = [None] * len(jobs)
        if batch.staged is not None:
            try:
                probs, errors = self.runner.execute(batch.staged)
                rows = list(np.array(probs, np.float32))  # one copy, the runner may reuse its buffer; a view a row
            except Exception as exc:  # the model failed: every request of the batch gets the error, the loop goes on
                errors = [f"{type(exc).__name__}: {exc}"] * len(jobs)
        t1 = time.monotonic()
        self.stats.batches += 1
        self.stats.images += len(jobs)
        self.stats.busy_s += t1 - t0
        prep_s, waited = batch.t_ready - batch.t_prep, t0 - batch.t_ready
        answers = []
        for job, row, error in zip(jobs, rows, errors, strict=True):
            job.image = None  # run: a batch waiting for its replies holds no images (memory stays bounded)
            if job.deadline <= t0:  # expired while its batch waited: a timeout, though its row was computed
                self.stats.expired += 1
                answers.append((job, Outcome(None, t0 - job.t_submit, 0.0, 0, "timeout")))
                continue
            queue_s = (batch.t_prep - job.t_submit) + waited
            outcome = Outcome(None if error else row, queue_s, t1 - t0, len(jobs), error, prep_s, job.t_submit)
            answers.append((job, outcome))
        self._replies.put(answers)
        if self.on_batch is not None:  # after the answers are on their way: the metrics are not on their path
            self.on_batch(len(jobs), t1 - t0)
