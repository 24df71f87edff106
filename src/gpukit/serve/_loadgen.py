"""One load-generating process: raw asyncio sockets, HTTP/1.1 keep-alive, a pre-built request per image.

Closed loop: ``connections`` clients, each sends its next request when the last one is answered. Open loop: requests
are due at a fixed rate; each goes out on a free connection, and one that finds none free is counted as ``missed``
(the generator fell behind) instead of being sent late, so an open-loop run never turns into a closed one. Latency is
measured from when the request was due, so a slow server cannot hide its queueing (no coordinated omission).
Runs in its own process (``spawn``); it imports nothing heavy.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ProcessResult", "Work", "run_process"]


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


def _parse_timing(value: bytes, into: dict[str, float]) -> None:
    for part in value.decode("latin-1").split(","):
        name, _, rest = part.strip().partition(";")
        if rest.startswith("dur="):
            with contextlib.suppress(ValueError):
                into[name] = into.get(name, 0.0) + float(rest[4:])


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, timing: dict[str, float]
) -> tuple[int, bool]:
    """Send one request, read its response; (status, keep-alive)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    keep = True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            length = int(value)
        elif key == b"server-timing":
            _parse_timing(value, timing)
        elif key == b"connection" and value.strip().lower() == b"close":
            keep = False
    if length:
        await reader.readexactly(length)
    return status, keep


class _Runner:
    def __init__(self, work: Work) -> None:
        self.work = work
        self.result = ProcessResult()
        self.t_measure = 0.0
        self.t_end = 0.0
        self.counter = 0

    def record(self, due: float, status: int, timing: dict[str, float]) -> None:
        now = time.perf_counter()
        r = self.result
        if due >= self.t_measure and now <= self.t_end:
            r.latencies_s.append(now - due)
            r.statuses[status] = r.statuses.get(status, 0) + 1
            for k, v in timing.items():
                r.timing_ms[k] = r.timing_ms.get(k, 0.0) + v

    def next_request(self) -> bytes | None:
        if self.result.sent >= self.work.max_requests:
            return None
        self.result.sent += 1
        self.counter += 1
        reqs = self.work.requests
        return reqs[self.counter % len(reqs)]

    async def one(self, conn: list[Any], request: bytes, due: float) -> None:
        """One request on ``conn`` ([reader, writer] or empty: connect first), recorded."""
        w = self.work
        timing: dict[str, float] = {}
        try:
            if not conn:
                conn.extend(await asyncio.wait_for(asyncio.open_connection(w.host, w.port), w.timeout_s))
            reader, writer = conn
            status, keep = await asyncio.wait_for(_exchange(reader, writer, request, timing), w.timeout_s)
            if not keep:
                writer.close()
                conn.clear()
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            status = 0
            if len(self.result.errors) < 5:
                self.result.errors.append(f"{type(exc).__name__}: {exc}")
            if conn:
                conn[1].close()
                conn.clear()
        self.record(due, status, timing)

    async def closed_client(self) -> None:
        conn: list[Any] = []
        while time.perf_counter() < self.t_end and (request := self.next_request()) is not None:
            await self.one(conn, request, time.perf_counter())
        if conn:
            conn[1].close()

    async def open_loop(self) -> None:
        assert self.work.rate
        free: list[list[Any]] = [[] for _ in range(self.work.connections)]
        interval = 1.0 / self.work.rate
        due = time.perf_counter()
        tasks: set[asyncio.Task[None]] = set()

        async def fire(conn: list[Any], request: bytes, due: float) -> None:
            await self.one(conn, request, due)
            free.append(conn)

        while due < self.t_end:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if not free:
                if due >= self.t_measure:
                    self.result.missed += 1
            elif (request := self.next_request()) is not None:
                task = asyncio.create_task(fire(free.pop(), request, due))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            due += interval
        if tasks:
            await asyncio.wait(tasks, timeout=self.work.timeout_s)
        for conn in free:
            if conn:
                conn[1].close()

    async def main(self) -> ProcessResult:
        w = self.work
        await asyncio.sleep(max(0.0, w.start_at - time.time()))
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        self.t_measure = t0 + w.warmup_s
        self.t_end = self.t_measure + w.duration_s
        if w.rate is None:
            await asyncio.gather(*(self.closed_client() for _ in range(w.connections)))
        else:
            await self.open_loop()
        t1 = time.perf_counter()
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        self.result.wall_s = t1 - t0
        self.result.measured_s = max(1e-9, min(t1, self.t_end) - self.t_measure)
        self.result.cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        return self.result


def run_process(work: Work) -> ProcessResult:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_Runner(work).main())
    return uvloop.run(_Runner(work).main())  # the generator's own event loop is as fast as the server's
