"""The pipe between an HTTP worker process and the one model process.

A request is one message: a 16-byte header (request id, deadline on the shared ``time.monotonic()`` clock, which
is CLOCK_MONOTONIC for every process of a Linux host) and the decoded uint8 image, 12 KiB at 64×64, 147 KiB at
224×224. A reply is a header (id, status, queue, preparation and inference seconds, batch size, queue depth) and the
probabilities as float32. ``multiprocessing`` pipes are Unix sockets: one ``send_bytes`` is one message, no pickling.
The worker's ``PipeClient`` looks like the ``Batcher`` to the HTTP code (its event loop reads the replies);
``serve_pipe`` feeds the real one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import struct
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from gpukit.serve.batcher import GONE, Batcher, Outcome, QueueFull

__all__ = ["PipeClient", "serve_pipe"]

_REQ = struct.Struct("<QdB")  # id, deadline, kind (0: uint8 pixels, 1: JPEG bytes for the model process to decode,
# 2: the worker's final counts as JSON, sent once as it exits, 3: cancel request id, its client went away)
_REP = struct.Struct("<QBdddII")  # id, status, queue_s, prep_s, infer_s, batch size, queue depth
_OK, _FULL, _TIMEOUT, _ERROR = 0, 1, 2, 3
_STATUS = {_FULL: "full", _TIMEOUT: "timeout"}


class PipeClient:
    """Worker side: ``submit`` writes the image to the pipe; each reply is handed to its callback.

    Called from an event loop (the HTTP worker), the loop itself reads the replies (``add_reader`` on the pipe,
    attached at the first submit) and runs the callbacks: no reader thread hands each reply over to the loop (both
    needed this process's GIL; the change took ResNet-50 on an H200 from 48 % to 50-55 % of the GPU's own rate,
    benchmarks/serve_h200_2026-12-01-run6.md). Called from plain threads, a reader thread does it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._ids = itertools.count(1)
        self._pending: dict[int, Callable[[Outcome], None]] = {}
        self._lock = threading.Lock()
        self._depth = 0
        self._reading: asyncio.AbstractEventLoop | threading.Thread | None = None
        self._on_gone: Callable[[], None] | None = None
        self.closed = False

    def watch(self, on_gone: Callable[[], None]) -> None:
        """Read the pipe from now on (on the running loop), not from the first request: the model process's exit
        is seen at once, also by a worker that has not sent anything yet; ``on_gone`` then runs (on the loop)."""
        self._on_gone = on_gone
        if self._reading is None:
            self._start_reading()

    @property
    def depth(self) -> int:
        return self._depth  # as of the last reply

    def submit(self, image: np.ndarray | bytes, deadline: float, callback: Callable[[Outcome], None]) -> int:
        """Send one image; returns its request id (what ``cancel`` takes)."""
        if self.closed:
            raise BrokenPipeError("the model process exited")
        if self._reading is None:
            self._start_reading()
        rid = next(self._ids)
        kind, payload = (1, image) if isinstance(image, bytes) else (0, image.tobytes())
        self._pending[rid] = callback
        try:
            with self._lock:
                self.conn.send_bytes(_REQ.pack(rid, deadline, kind) + payload)
        except OSError:  # the model process is gone (its end of the pipe closed): the caller answers 503
            self._pending.pop(rid, None)
            raise
        return rid

    def cancel(self, rid: int) -> None:
        """The client of request ``rid`` went away: the model process drops it if its batch was not formed yet;
        its reply, if one still comes, is ignored."""
        if self._pending.pop(rid, None) is None or self.closed:
            return
        with self._lock:
            self.conn.send_bytes(_REQ.pack(rid, 0.0, 3))

    def send_counts(self, counts: dict[str, int]) -> None:
        """As the worker exits: its requests and connections, for the server's shutdown summary."""
        with self._lock:
            self.conn.send_bytes(_REQ.pack(0, 0.0, 2) + json.dumps(counts).encode())

    def _start_reading(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop here: a thread reads
            self._reading = threading.Thread(target=self._read, name="gpukit-pipe-reader", daemon=True)
            self._reading.start()
            return
        loop.add_reader(self.conn.fileno(), self._drain)
        # uvloop (libuv) makes a watched descriptor non-blocking; this pipe's reads and writes are whole messages,
        # so it stays blocking (a 45 kB request then no longer fails half-written when the socket buffer is full)
        os.set_blocking(self.conn.fileno(), True)
        self._reading = loop

    def _drain(self) -> None:
        """On the loop, when the pipe is readable: every reply that has arrived."""
        try:
            while self.conn.poll(0):
                self._deliver(self.conn.recv_bytes())
        except (EOFError, OSError):
            assert isinstance(self._reading, asyncio.AbstractEventLoop)
            self._reading.remove_reader(self.conn.fileno())
            self._fail_all()

    def _read(self) -> None:
        try:
            while True:
                self._deliver(self.conn.recv_bytes())
        except (EOFError, OSError):
            self._fail_all()

    def _deliver(self, msg: bytes) -> None:
        rid, status, queue_s, prep_s, infer_s, batch, depth = _REP.unpack_from(msg)
        self._depth = depth
        callback = self._pending.pop(rid, None)
        if callback is None:
            return
        if status == _OK:
            probs = np.frombuffer(msg, np.float32, offset=_REP.size).tolist()
            callback(Outcome(probs, queue_s, infer_s, batch, None, prep_s))
        else:
            error = _STATUS.get(status) or msg[_REP.size :].decode(errors="replace")
            callback(Outcome(None, queue_s, infer_s, batch, error, prep_s))

    def _fail_all(self) -> None:
        """The model process went away: every waiting request fails now, not at its deadline."""
        self.closed = True
        for callback in list(self._pending.values()):
            callback(Outcome(None, 0.0, 0.0, 0, GONE))
        self._pending.clear()
        if self._on_gone is not None:
            self._on_gone()


def serve_pipe(
    conn: Connection,
    batcher: Batcher,
    shape: tuple[int, int, int],
    on_counts: Callable[[dict[str, int]], None] | None = None,
) -> threading.Thread:
    """Model side: a thread that reads one worker's requests into the batcher and writes the replies back;
    ``on_counts`` gets the worker's final counts (``PipeClient.send_counts``)."""
    lock = threading.Lock()
    nbytes = int(np.prod(shape))
    jobs: dict[int, Any] = {}  # request id → the batcher's handle, until answered (for a cancel)
    early: set[int] = set()  # answered before their handle was stored (a callback may run inside submit)
    jobs_lock = threading.Lock()

    def reply(rid: int, status: int, outcome: Outcome | None, tail: bytes) -> None:
        head = _REP.pack(
            rid,
            status,
            outcome.queue_s if outcome else 0.0,
            outcome.prep_s if outcome else 0.0,
            outcome.infer_s if outcome else 0.0,
            outcome.batch_size if outcome else 0,
            batcher.depth,
        )
        try:
            with lock:
                conn.send_bytes(head + tail)
        except OSError:
            pass  # the worker went away; its requests are gone with it

    def loop() -> None:
        while True:
            try:
                msg = conn.recv_bytes()
            except (EOFError, OSError):  # the worker exited: replies still due for it fail quietly in reply()
                with lock:
                    conn.close()
                return
            rid, deadline, kind = _REQ.unpack_from(msg)
            image: np.ndarray | bytes
            if kind == 2:
                if on_counts is not None:
                    on_counts(json.loads(msg[_REQ.size :]))
                continue
            if kind == 3:
                with jobs_lock:
                    job = jobs.pop(rid, None)
                if job is not None:
                    batcher.cancel(job)
                continue
            if kind == 1:
                image = msg[_REQ.size :]
            elif len(msg) == _REQ.size + nbytes:
                image = np.frombuffer(msg, np.uint8, offset=_REQ.size).reshape(shape)
            else:
                reply(rid, _ERROR, None, b"image of the wrong size")
                continue

            def done(outcome: Outcome, rid: int = rid) -> None:
                with jobs_lock:
                    if jobs.pop(rid, None) is None:
                        early.add(rid)
                if outcome.error is None and outcome.probs is not None:
                    reply(rid, _OK, outcome, np.asarray(outcome.probs, np.float32).tobytes())
                elif outcome.error == "timeout":
                    reply(rid, _TIMEOUT, outcome, b"")
                else:
                    reply(rid, _ERROR, outcome, (outcome.error or "error").encode())

            try:
                job = batcher.submit(image, deadline, done)
                with jobs_lock:
                    if rid in early:
                        early.discard(rid)
                    else:
                        jobs[rid] = job
            except QueueFull:
                reply(rid, _FULL, None, b"")

    thread = threading.Thread(target=loop, name="gpukit-pipe", daemon=True)
    thread.start()
    return thread
