"""The pipe between an HTTP worker process and the one model process.

A pipe message holds one or more records. A request record is a header (payload length, request id, deadline on
the shared ``time.monotonic()`` clock, which is CLOCK_MONOTONIC for every process of a Linux host, kind) and the
JPEG bytes or decoded uint8 image (12 KiB at 64×64, 147 KiB at 224×224). A reply record is a header (tail length,
id, status, queue, preparation and inference seconds, batch size, queue depth) and the probabilities as float32.
``multiprocessing`` pipes are Unix sockets: one ``send_bytes`` is one message, no pickling.

Records are gathered per write: a worker's event loop sends the requests of one loop iteration in one message, and
the model process sends the replies one batch has for a worker in one message (``Batcher.after_replies``), instead
of one message (and its system calls and GIL hand-offs) per request each way. The model process reads each pipe
with ``_Frames`` (into one reused buffer, without the GIL) rather than ``recv_bytes``: ResNet-50 on an H200 served
11,548 against 10,853 and 10,679 req/s with it and the one-call pinned copy (benchmarks/serve-knobs_h200_2026-12-04.md).
The worker's ``PipeClient`` looks like the ``Batcher`` to the HTTP code (its event loop reads the replies);
``serve_pipe`` feeds the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import struct
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from gpukit.serve.batcher import GONE, Batcher, Outcome, QueueFull

__all__ = ["PipeClient", "serve_pipe"]

_REQ = struct.Struct("<IQdB")  # payload length, id, deadline, kind (0: uint8 pixels, 1: JPEG bytes for the model
# process to decode, 2: the worker's final counts as JSON, sent once as it exits, 3: cancel request id, its client
# went away)
_REP = struct.Struct("<IQBdddII")  # tail length, id, status, queue_s, prep_s, infer_s, batch size, queue depth
_OK, _FULL, _TIMEOUT, _ERROR = 0, 1, 2, 3
_STATUS = {_FULL: "full", _TIMEOUT: "timeout"}
_FLUSH_BYTES = 4 << 20  # a worker's gathered requests are sent at once past this many bytes


def _records(msg: bytes | memoryview, head: struct.Struct) -> Iterator[tuple[tuple[Any, ...], bytes]]:
    """(header fields after the length, payload) of every record of one pipe message; each payload its own bytes."""
    at = 0
    while at < len(msg):
        fields = head.unpack_from(msg, at)
        start = at + head.size
        at = start + fields[0]
        yield fields[1:], bytes(msg[start:at])


class _Frames:
    """Whole messages of a ``multiprocessing`` connection (a 4-byte big-endian length, or -1 and 8 bytes, then the
    message), read with ``os.readv`` straight into one reused buffer: each read takes what has arrived, several
    messages or part of one, without the GIL; ``Connection.recv_bytes`` instead allocates per read and copies each
    chunk twice more with the GIL held. A message is a view of the buffer, valid until the next ``next()``."""

    def __init__(self, fd: int, size: int = 1 << 20) -> None:
        self.fd = fd
        self.buf = bytearray(size)
        self.start = self.end = 0

    def __iter__(self) -> Iterator[memoryview]:
        return self

    def __next__(self) -> memoryview:
        while True:
            frame = self._frame()
            if frame is not None:
                return frame
            self._read()

    def _frame(self) -> memoryview | None:
        have = self.end - self.start
        if have < 4:
            return None
        size, head = int.from_bytes(self.buf[self.start : self.start + 4], "big", signed=True), 4
        if size == -1:
            if have < 12:
                return None
            size, head = int.from_bytes(self.buf[self.start + 4 : self.start + 12], "big"), 12
        if have < head + size:
            self._room(head + size)
            return None
        at = self.start + head
        self.start = at + size
        return memoryview(self.buf)[at : at + size]

    def _room(self, need: int) -> None:
        """Make room for a message of ``need`` bytes from ``start``: move what is held to the front, or grow."""
        held = self.end - self.start
        if need > len(self.buf):
            new = bytearray(max(need, 2 * len(self.buf)))
            new[:held] = self.buf[self.start : self.end]
            self.buf = new
        elif self.start + need > len(self.buf):
            view = memoryview(self.buf)
            view[:held] = view[self.start : self.end]
        else:
            return
        self.start, self.end = 0, held

    def _read(self) -> None:
        if self.start == self.end:
            self.start = self.end = 0
        elif self.end == len(self.buf):
            self._room(len(self.buf) - self.start + 1)
        n = os.readv(self.fd, [memoryview(self.buf)[self.end :]])
        if n == 0:
            raise EOFError
        self.end += n


class _Outbox:
    """Records waiting for one write to ``conn``; ``flush`` sends them as one message (any thread)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.parts: list[bytes] = []
        self.size = 0
        self.lock = threading.Lock()

    def add(self, *parts: bytes) -> bool:
        """Queue one record; True when it is the first since the last flush."""
        with self.lock:
            first = not self.parts
            self.parts.extend(parts)
            self.size += sum(map(len, parts))
            return first

    def flush(self) -> None:
        """Send what is queued (raises OSError when the other end is gone)."""
        if not self.parts:
            return
        with self.lock:  # held through the write: messages leave in order, one at a time
            data, self.parts, self.size = b"".join(self.parts), [], 0
            if data:
                self.conn.send_bytes(data)


class PipeClient:
    """Worker side: ``submit`` queues the image for the pipe; each reply is handed to its callback.

    Called from an event loop (the HTTP worker), the loop itself reads the replies (``add_reader`` on the pipe,
    attached at the first submit) and runs the callbacks: no reader thread hands each reply over to the loop (both
    needed this process's GIL; the change took ResNet-50 on an H200 from 48 % to 50-55 % of the GPU's own rate,
    benchmarks/serve_h200_2026-12-01-run6.md), and the requests of one loop iteration leave in one write at its end
    (``call_soon``). Called from plain threads, each request is written at once and a reader thread reads."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._ids = itertools.count(1)
        self._pending: dict[int, Callable[[Outcome], None]] = {}
        self._out = _Outbox(conn)
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
        """Queue one image; returns its request id (what ``cancel`` takes)."""
        if self.closed:
            raise BrokenPipeError("the model process exited")
        if self._reading is None:
            self._start_reading()
        rid = next(self._ids)
        kind, payload = (1, image) if isinstance(image, bytes) else (0, image.tobytes())
        self._pending[rid] = callback
        try:
            self._send(_REQ.pack(len(payload), rid, deadline, kind), payload)
        except OSError:  # the model process is gone (its end of the pipe closed): the caller answers 503
            self._pending.pop(rid, None)
            raise
        return rid

    def cancel(self, rid: int) -> None:
        """The client of request ``rid`` went away: the model process drops it if its batch was not formed yet;
        its reply, if one still comes, is ignored."""
        if self._pending.pop(rid, None) is None or self.closed:
            return
        self._send(_REQ.pack(0, rid, 0.0, 3))

    def send_counts(self, counts: dict[str, int]) -> None:
        """As the worker exits: its requests and connections, for the server's shutdown summary."""
        data = json.dumps(counts).encode()
        self._out.add(_REQ.pack(len(data), 0, 0.0, 2), data)
        self._out.flush()

    def _send(self, *parts: bytes) -> None:
        first = self._out.add(*parts)
        if not isinstance(self._reading, asyncio.AbstractEventLoop) or self._out.size >= _FLUSH_BYTES:
            self._out.flush()
        elif first:
            self._reading.call_soon(self._flush)

    def _flush(self) -> None:
        """On the loop, at the end of the iteration that queued requests: one write for all of them."""
        try:
            self._out.flush()
        except OSError:  # the model process is gone: its waiting requests fail now (the reader sees it too)
            self._fail_all()

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
        for (rid, status, queue_s, prep_s, infer_s, batch, depth), tail in _records(msg, _REP):
            self._depth = depth
            callback = self._pending.pop(rid, None)
            if callback is None:
                continue
            if status == _OK:
                probs = np.frombuffer(tail, np.float32).tolist()
                callback(Outcome(probs, queue_s, infer_s, batch, None, prep_s))
            else:
                error = _STATUS.get(status) or tail.decode(errors="replace")
                callback(Outcome(None, queue_s, infer_s, batch, error, prep_s))

    def _fail_all(self) -> None:
        """The model process went away: every waiting request fails now, not at its deadline."""
        if self.closed and not self._pending:
            return
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
    """Model side: a thread that reads one worker's requests into the batcher; the replies of each batch go back
    in one write (``Batcher.after_replies``); ``on_counts`` gets the worker's final counts
    (``PipeClient.send_counts``)."""
    out = _Outbox(conn)
    nbytes = int(np.prod(shape))
    jobs: dict[int, Any] = {}  # request id → the batcher's handle, until answered (for a cancel)
    early: set[int] = set()  # answered before their handle was stored (a callback may run inside submit)
    jobs_lock = threading.Lock()

    def reply(rid: int, status: int, outcome: Outcome | None, tail: bytes) -> None:
        o = outcome or Outcome(None, 0.0, 0.0, 0)
        out.add(_REP.pack(len(tail), rid, status, o.queue_s, o.prep_s, o.infer_s, o.batch_size, batcher.depth), tail)

    def flush() -> None:
        with contextlib.suppress(OSError):  # the worker went away; its requests are gone with it
            out.flush()

    def done(outcome: Outcome, rid: int) -> None:
        with jobs_lock:
            if jobs.pop(rid, None) is None:
                early.add(rid)
        if outcome.error is None and outcome.probs is not None:
            reply(rid, _OK, outcome, np.asarray(outcome.probs, np.float32).tobytes())
        elif outcome.error == "timeout":
            reply(rid, _TIMEOUT, outcome, b"")
        else:
            reply(rid, _ERROR, outcome, (outcome.error or "error").encode())

    def handle(rid: int, deadline: float, kind: int, payload: bytes) -> None:
        image: np.ndarray | bytes
        if kind == 2:
            if on_counts is not None:
                on_counts(json.loads(payload))
            return
        if kind == 3:
            with jobs_lock:
                job = jobs.pop(rid, None)
            if job is not None:
                batcher.cancel(job)
            return
        if kind == 1:
            image = payload
        elif len(payload) == nbytes:
            image = np.frombuffer(payload, np.uint8).reshape(shape)
        else:
            reply(rid, _ERROR, None, b"image of the wrong size")
            return
        try:
            job = batcher.submit(image, deadline, functools.partial(done, rid=rid))
            with jobs_lock:
                if rid in early:
                    early.discard(rid)
                else:
                    jobs[rid] = job
        except QueueFull:
            reply(rid, _FULL, None, b"")

    def loop() -> None:
        batcher.after_replies.append(flush)
        frames = _Frames(conn.fileno())
        try:
            while True:
                try:
                    msg = next(frames)
                except (EOFError, OSError):  # the worker exited: replies still due for it are dropped
                    break
                for (rid, deadline, kind), payload in _records(msg, _REQ):
                    handle(rid, deadline, kind, payload)
                flush()  # this thread's own answers (queue full, wrong size)
        finally:
            with contextlib.suppress(ValueError):
                batcher.after_replies.remove(flush)
            with out.lock:
                conn.close()

    thread = threading.Thread(target=loop, name="gpukit-pipe", daemon=True)
    thread.start()
    return thread
