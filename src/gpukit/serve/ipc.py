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
A worker reads its replies the same way: one ``readv`` each time the pipe is readable, where ``poll`` and
``recv_bytes`` made four system calls a message (benchmarks/serve-syscalls_cpu_2026-12-05.md). The worker's
``PipeClient`` looks like the ``Batcher`` to the HTTP code (its event loop reads the replies); ``PipeHub`` feeds the
real one, one thread reading every worker's pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import selectors
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from gpukit.serve.batcher import GONE, Batcher, Outcome, QueueFull

__all__ = ["PipeClient", "PipeHub"]

_REQ = struct.Struct("<IQdB")  # payload length, id, deadline, kind (0: uint8 pixels, 1: JPEG bytes for the model
# process to decode, 2: the worker's final counts as JSON, sent once as it exits, 3: cancel request id, its client
# went away)
_REP = struct.Struct("<IQBddddII")  # tail length, id, status, queue_s, prep_s, infer_s, the batcher's submit time
# (``Outcome.t_submit``), batch size, queue depth
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
    chunk twice more with the GIL held. A message is a view of the buffer, valid until the next ``read``."""

    def __init__(self, fd: int, size: int = 1 << 20) -> None:
        self.fd = fd
        self.buf = bytearray(size)
        self.start = self.end = 0

    def frame(self) -> memoryview | None:
        """The next whole message held (None: more must be read first)."""
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

    def read(self) -> None:
        """One ``readv`` of what has arrived (it blocks until something has); ``EOFError`` once the writer closed."""
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
        self._frames = _Frames(conn.fileno(), 1 << 16)  # the replies, read as the model process reads requests
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
        """On the loop, when the pipe is readable: one read of what has arrived (one system call, where
        ``poll`` and ``recv_bytes`` took four a message), and every whole reply in it."""
        try:
            self._frames.read()
        except (EOFError, OSError):
            assert isinstance(self._reading, asyncio.AbstractEventLoop)
            self._reading.remove_reader(self.conn.fileno())
            self._fail_all()
            return
        while (msg := self._frames.frame()) is not None:
            self._deliver(msg)

    def _read(self) -> None:
        try:
            while True:
                self._frames.read()
                while (msg := self._frames.frame()) is not None:
                    self._deliver(msg)
        except (EOFError, OSError):
            self._fail_all()

    def _deliver(self, msg: bytes | memoryview) -> None:
        for (rid, status, queue_s, prep_s, infer_s, t_submit, batch, depth), tail in _records(msg, _REP):
            self._depth = depth
            callback = self._pending.pop(rid, None)
            if callback is None:
                continue
            if status == _OK:
                callback(Outcome(np.frombuffer(tail, np.float32), queue_s, infer_s, batch, None, prep_s, t_submit))
            else:
                error = _STATUS.get(status) or tail.decode(errors="replace")
                callback(Outcome(None, queue_s, infer_s, batch, error, prep_s, t_submit))

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


class _Endpoint:
    """The model side of one worker's pipe: its requests into the batcher, its replies gathered per batch."""

    def __init__(self, conn: Connection, hub: PipeHub) -> None:
        self.conn, self.hub = conn, hub
        self.fd = conn.fileno()
        self.out = _Outbox(conn)
        self.frames = _Frames(self.fd)
        self.nbytes = int(np.prod(hub.shape))
        self.jobs: dict[int, Any] = {}  # request id → the batcher's handle, until answered (for a cancel)
        self.early: set[int] = set()  # answered before their handle was stored (a callback may run inside submit)
        self.jobs_lock = threading.Lock()
        hub.batcher.after_replies.append(self.flush)

    def read(self) -> bool:
        """One read of what has arrived, and every whole message in it handled; False once the worker has gone."""
        try:
            self.frames.read()
        except (EOFError, OSError):  # the worker exited: replies still due for it are dropped (``close``)
            return False
        while (msg := self.frames.frame()) is not None:
            for (rid, deadline, kind), payload in _records(msg, _REQ):
                self.handle(rid, deadline, kind, payload)
        self.flush()  # this thread's own answers (queue full, wrong size)
        return True

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.hub.batcher.after_replies.remove(self.flush)
        with self.out.lock:
            self.conn.close()

    def reply(self, rid: int, status: int, outcome: Outcome | None, tail: bytes) -> None:
        o = outcome or Outcome(None, 0.0, 0.0, 0)
        depth = self.hub.batcher.depth
        head = _REP.pack(len(tail), rid, status, o.queue_s, o.prep_s, o.infer_s, o.t_submit, o.batch_size, depth)
        self.out.add(head, tail)

    def flush(self) -> None:
        with contextlib.suppress(OSError):  # the worker went away; its requests are gone with it
            self.out.flush()

    def done(self, outcome: Outcome, rid: int) -> None:
        with self.jobs_lock:
            if self.jobs.pop(rid, None) is None:
                self.early.add(rid)
        if outcome.error is None and outcome.probs is not None:
            self.reply(rid, _OK, outcome, outcome.probs.tobytes())
        elif outcome.error == "timeout":
            self.reply(rid, _TIMEOUT, outcome, b"")
        else:
            self.reply(rid, _ERROR, outcome, (outcome.error or "error").encode())

    def handle(self, rid: int, deadline: float, kind: int, payload: bytes) -> None:
        image: np.ndarray | bytes
        if kind == 2:
            if self.hub.on_counts is not None:
                self.hub.on_counts(json.loads(payload))
            return
        if kind == 3:
            with self.jobs_lock:
                job = self.jobs.pop(rid, None)
            if job is not None:
                self.hub.batcher.cancel(job)
            return
        if kind == 1:
            image = payload
        elif len(payload) == self.nbytes:
            image = np.frombuffer(payload, np.uint8).reshape(self.hub.shape)
        else:
            self.reply(rid, _ERROR, None, b"image of the wrong size")
            return
        try:
            job = self.hub.batcher.submit(image, deadline, functools.partial(self.done, rid=rid))
            with self.jobs_lock:
                if rid in self.early:
                    self.early.discard(rid)
                else:
                    self.jobs[rid] = job
        except QueueFull:
            self.reply(rid, _FULL, None, b"")


class PipeHub:
    """Model side: one thread reads every worker's pipe (``add``) into the batcher, waiting on all of them at once
    (``selectors``); the replies of each batch go back to each worker in one write (``Batcher.after_replies``);
    ``on_counts`` gets each worker's final counts (``PipeClient.send_counts``).

    One thread for all pipes, not one per pipe: each message woke its own thread, which then took the GIL that the
    batcher's two CUDA threads take back after every torch call (on an H200, eight threads of a seed-CNN model
    process, by their number the pipe readers, used 0.37-0.43 cores together). With one, the model process spent
    15-20 % less CPU a request on a 2-core CPU VM (benchmarks/serve-hub_cpu_2026-12-05.md); on an H100 host it
    served as much as before with four busy threads instead of eleven (benchmarks/serve-hub_h100_2026-12-05.md).
    A pipe whose message cannot be handled is closed alone (``_read``). ``until_empty``: the thread ends once the
    last pipe it had has closed (a single worker's pipe, in tests and benchmarks); else it runs for the
    process's life, as workers come and go."""

    def __init__(
        self,
        batcher: Batcher,
        shape: tuple[int, int, int],
        on_counts: Callable[[dict[str, int]], None] | None = None,
        conns: Iterable[Connection] = (),
        until_empty: bool = False,
    ) -> None:
        self.batcher, self.shape, self.on_counts = batcher, shape, on_counts
        self.until_empty = until_empty
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._added: list[Connection] = list(conns)
        self._lock = threading.Lock()
        self._register_added()
        self.thread = threading.Thread(target=self._loop, name="gpukit-pipes", daemon=True)
        self.thread.start()

    def add(self, conn: Connection) -> None:
        """Read this worker's pipe too, from now on (any thread)."""
        with self._lock:
            self._added.append(conn)
        os.write(self._wake_w, b"\0")

    def _register_added(self) -> None:
        with self._lock:
            added, self._added = self._added, []
        for conn in added:
            endpoint = _Endpoint(conn, self)
            self._sel.register(endpoint.fd, selectors.EVENT_READ, endpoint)

    @staticmethod
    def _read(endpoint: _Endpoint) -> bool:
        """``endpoint.read()``; a failure there is that pipe's alone: it is closed (its worker answers 503 and is
        replaced), the hub and the other workers go on."""
        try:
            return endpoint.read()
        except Exception:
            return False

    def _loop(self) -> None:
        try:
            while True:
                for key, _ in self._sel.select():
                    if key.data is None:  # a pipe was added
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 4096)
                        self._register_added()
                    elif not self._read(key.data):
                        self._sel.unregister(key.fd)
                        key.data.close()
                if self.until_empty and len(self._sel.get_map()) == 1:  # only the wake-up pipe is left
                    return
        finally:
            for key in list(self._sel.get_map().values()):
                if key.data is not None:
                    key.data.close()
            self._sel.close()
            os.close(self._wake_r)
            os.close(self._wake_w)
