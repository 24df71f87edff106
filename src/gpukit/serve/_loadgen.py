"""One load-generating process: asyncio protocols, HTTP/1.1 keep-alive, a pre-built request per image.

Closed loop: ``connections`` clients, each sends its next request when the last one is answered. Open loop: requests
are due at a fixed rate; each goes out on a free connection, and one that finds none free is counted as ``missed``
(the generator fell behind) instead of being sent late, so an open-loop run never turns into a closed one. Latency is
measured from when the request was due, so a slow server cannot hide its queueing (no coordinated omission).

Each connection is a state machine (``_Conn``): its response is parsed as the bytes arrive, and what follows (record
it, send the next request) runs in ``data_received`` itself, with no coroutine, stream reader or timer per request;
one watchdog a process times out what waits too long. The generator's own turnaround is part of every latency it
reports and its CPU competes with the server's on the same host, so it is kept small: 17 against 33 µs of CPU a
request with asyncio streams on a 2-core VM (benchmarks/loadgen-protocol_cpu_2026-12-06.md).
Runs in its own process (``spawn``); it imports nothing heavy.
"""

from __future__ import annotations

import asyncio
import resource
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ProcessResult", "Work", "run_process"]

MAX_HEAD = 64 << 10  # a response head larger than this is an error, not a reason to buffer without end


@dataclass
class Work:
    host: str
    port: int
    requests: list[bytes]  # complete HTTP requests, headers and body, cycled through
    connections: int
    duration_s: float
    warmup_s: float
    rate: float | None  # requests/s for this process; None = closed loop
    max_requests: int
    timeout_s: float
    start_at: float  # time.time() at which every process begins, so they start together


@dataclass
class ProcessResult:
    latencies_s: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)  # 0 = connection error or timeout
    timing_ms: dict[str, float] = field(default_factory=dict)  # Server-Timing durations summed over measured requests
    sent: int = 0  # every request sent, warm-up included
    missed: int = 0
    measured_s: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)


class BadResponse(Exception):
    """The server's bytes are not an HTTP/1.1 response this generator reads."""


def _parse_timing(value: bytes, into: dict[bytes, float]) -> None:
    """Add each ``name;…;dur=ms`` of a Server-Timing value to ``into``, keyed by the name's raw bytes (``_names``
    strips and decodes them once, after the run: 3 against 6 µs a response)."""
    for part in value.split(b","):
        name, sep, dur = part.partition(b";dur=")
        if not sep:
            continue
        try:
            ms = float(dur.partition(b";")[0])
        except ValueError:
            continue
        name = name.partition(b";")[0]
        into[name] = into.get(name, 0.0) + ms


def _names(raw: dict[bytes, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, ms in raw.items():
        key = name.strip().decode("latin-1")
        out[key] = out.get(key, 0.0) + ms
    return out


def _field(head: bytes, low: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case, as b"\\r\\nname:") in ``head``, found in its lower-cased copy."""
    at = low.find(name)
    if at < 0:
        return None
    start = at + len(name)
    end = low.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


def parse_head(head: bytes) -> tuple[int, int, bool, bytes | None]:
    """(status, body length, keep-alive, Server-Timing value) of a response head (without its blank line)."""
    if not head.startswith(b"HTTP/1."):
        raise BadResponse(f"not an HTTP/1.x response: {head[:40]!r}")
    try:
        status = int(head[9:12])
    except ValueError:
        raise BadResponse(f"no status code in {head[:40]!r}") from None
    low = head.lower()
    if b"\r\ntransfer-encoding:" in low:
        raise BadResponse("a chunked (Transfer-Encoding) response: this generator reads Content-Length bodies")
    raw = _field(head, low, b"\r\ncontent-length:")
    try:
        length = int(raw) if raw is not None else 0
    except ValueError:
        length = -1
    if length < 0:
        raise BadResponse(f"Content-Length {raw!r}")
    connection = (_field(head, low, b"\r\nconnection:") or b"").lower()
    keep = connection != b"close" if head[7:8] != b"0" else connection == b"keep-alive"  # HTTP/1.0: close by default
    return status, length, keep, _field(head, low, b"\r\nserver-timing:")


class _Conn(asyncio.Protocol):
    """One connection; at most one request on it at a time."""

    def __init__(self, gen: _Generator) -> None:
        self.gen = gen
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.due = 0.0
        self.sent_at = 0.0
        self.busy = False
        self.head: tuple[int, int, bool, bytes | None] | None = None  # parsed while the body still arrives
        self.body_at = 0

    @property
    def alive(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.gen.conns.add(self)

    def send(self, request: bytes, due: float) -> None:
        assert self.transport is not None
        self.due, self.sent_at, self.busy = due, time.perf_counter(), True
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if not self.busy:  # bytes no request asked for: this connection can no longer be read in step
            self.close(abort=True)
            return
        try:
            if self.head is None:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise BadResponse(f"a response head over {MAX_HEAD} bytes")
                    return
                self.head, self.body_at = parse_head(bytes(buf[:end])), end + 4
            status, length, keep, timing = self.head
            if len(buf) < self.body_at + length:
                return
        except BadResponse as exc:
            self.fail(exc)
            return
        del buf[: self.body_at + length]
        self.head, self.busy = None, False
        if not keep or buf:  # the server closes it, or sent more than was asked: the next request takes a new one
            self.close()
        self.gen.answered(self, status, timing)

    def fail(self, exc: BaseException) -> None:
        """This connection's request failed (status 0); the connection is dropped at once."""
        if not self.busy:
            return
        self.busy = False
        self.close(abort=True)
        self.gen.failed(self, exc)

    def close(self, abort: bool = False) -> None:
        self.buf.clear()
        self.head = None
        if self.transport is not None:
            self.transport.abort() if abort else self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gen.conns.discard(self)
        self.transport = None
        if self.busy:
            self.fail(exc or ConnectionResetError("the server closed the connection before it answered"))


class _Generator:
    def __init__(self, work: Work) -> None:
        self.work = work
        self.result = ProcessResult()
        self.timing: dict[bytes, float] = {}
        self.t_measure = 0.0
        self.t_end = 0.0
        self.conns: set[_Conn] = set()
        self.loop = asyncio.get_running_loop()
        self.tasks: set[asyncio.Task[None]] = set()
        self.active = 0  # closed loop: clients still sending; open loop: requests in flight
        self.idle: asyncio.Event = asyncio.Event()
        self.free: list[_Conn | None] = []  # open loop: connections without a request (None: not connected yet)

    def record(self, due: float, status: int, timing: bytes | None) -> None:
        now = time.perf_counter()
        r = self.result
        if due >= self.t_measure and now <= self.t_end:
            r.latencies_s.append(now - due)
            r.statuses[status] = r.statuses.get(status, 0) + 1
            if timing is not None:
                _parse_timing(timing, self.timing)

    def error(self, exc: BaseException) -> None:
        if len(self.result.errors) < 5:
            self.result.errors.append(f"{type(exc).__name__}: {exc}")

    def next_request(self) -> bytes | None:
        if self.result.sent >= self.work.max_requests:
            return None
        self.result.sent += 1
        reqs = self.work.requests
        return reqs[self.result.sent % len(reqs)]

    def spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def send(self, conn: _Conn | None, request: bytes, due: float) -> None:
        """``request`` on ``conn``, or on a new connection (its connecting counts in the request's latency)."""
        if conn is not None and conn.alive:
            conn.send(request, due)
        else:
            self.spawn(self._connect_and_send(request, due))

    async def _connect_and_send(self, request: bytes, due: float) -> None:
        w = self.work
        try:
            connecting = self.loop.create_connection(lambda: _Conn(self), w.host, w.port)
            _, conn = await asyncio.wait_for(connecting, w.timeout_s)
        except (TimeoutError, OSError) as exc:
            self.error(exc)
            self.record(due, 0, None)
            self.after(None)
            return
        conn.send(request, due)

    def answered(self, conn: _Conn, status: int, timing: bytes | None) -> None:
        self.record(conn.due, status, timing)
        self.after(conn)

    def failed(self, conn: _Conn, exc: BaseException) -> None:
        self.error(exc)
        self.record(conn.due, 0, None)
        self.loop.call_soon(self.after, None)  # not from inside the failing connection's callbacks

    def after(self, conn: _Conn | None) -> None:
        """A request is done (``conn``: its connection, if it is still usable)."""
        if self.work.rate is None:
            request = self.next_request() if time.perf_counter() < self.t_end else None
            if request is not None:
                self.send(conn, request, time.perf_counter())
                return
            if conn is not None:
                conn.close()
        else:
            self.free.append(conn)
        self.active -= 1
        if self.active == 0:
            self.idle.set()

    async def watchdog(self) -> None:
        """Fails every request that has waited ``timeout_s``, checked a few times a second."""
        timeout = self.work.timeout_s
        while True:
            await asyncio.sleep(min(0.1, timeout / 4))
            now = time.perf_counter()
            for conn in [c for c in self.conns if c.busy and now - c.sent_at > timeout]:
                conn.fail(TimeoutError(f"no answer within {timeout:g} s"))

    def closed_loop(self) -> None:
        for _ in range(self.work.connections):
            request = self.next_request()
            if request is None:
                break
            self.active += 1
            self.send(None, request, time.perf_counter())

    async def open_loop(self) -> None:
        assert self.work.rate
        self.free = [None] * self.work.connections
        interval = 1.0 / self.work.rate
        due = time.perf_counter()
        while due < self.t_end:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if not self.free:
                if due >= self.t_measure:
                    self.result.missed += 1
            elif (request := self.next_request()) is not None:
                self.active += 1
                self.send(self.free.pop(), request, due)
            due += interval

    async def main(self) -> ProcessResult:
        w = self.work
        await asyncio.sleep(max(0.0, w.start_at - time.time()))
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        self.t_measure = t0 + w.warmup_s
        self.t_end = self.t_measure + w.duration_s
        watchdog = self.loop.create_task(self.watchdog())
        if w.rate is None:
            self.closed_loop()
        else:
            await self.open_loop()
        if self.active:  # the last answers (the watchdog and the connect timeout bound the wait)
            self.idle.clear()
            await self.idle.wait()
        watchdog.cancel()
        for conn in list(self.conns):
            conn.close()
        t1 = time.perf_counter()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        self.result.wall_s = t1 - t0
        self.result.measured_s = max(1e-9, min(t1, self.t_end) - self.t_measure)
        self.result.cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        self.result.timing_ms = _names(self.timing)
        return self.result


async def _run(work: Work) -> ProcessResult:
    return await _Generator(work).main()


def run_process(work: Work) -> ProcessResult:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_run(work))
    return uvloop.run(_run(work))  # the generator's own event loop is as fast as the server's
