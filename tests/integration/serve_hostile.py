"""Hostile clients for the serve tests (loopback only, bounded in count and time): slow senders held in a process of
their own, normal requests measured beside them, and a figures log for benchmarks/.

``GPUKIT_HOSTILE_SCALE=full`` runs the counts of issue 22 (1,100 slow bodies, 2,000 slowloris, 20 uploads per
client); the default is the CI scale. ``GPUKIT_HOSTILE_FIGURES=FILE`` appends each test's measured figures to FILE
(one JSON object a line), which is how benchmarks/serve-hostile_cpu_*.md was made.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

FULL = os.environ.get("GPUKIT_HOSTILE_SCALE", "ci") == "full"


def scaled(ci: int, full: int) -> int:
    return full if FULL else ci


def record(test: str, **figures: object) -> None:
    """Append this test's measured figures to $GPUKIT_HOSTILE_FIGURES (nothing when unset)."""
    path = os.environ.get("GPUKIT_HOSTILE_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": test, "scale": "full" if FULL else "ci", **figures}) + "\n")


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname in ("127.0.0.1", "localhost", "::1")  # loopback only
    return parts.hostname, parts.port or 80


@dataclass
class Probe:
    """Normal requests sent beside an attack: their statuses and latencies."""

    pairs: list[tuple[int | str, float]] = field(default_factory=list)  # (status or error name, milliseconds)

    @property
    def statuses(self) -> Counter[int | str]:
        return Counter(s for s, _ in self.pairs)

    @property
    def latencies_ms(self) -> list[float]:
        return [ms for _, ms in self.pairs]

    def p(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("inf")

    @property
    def ok_share(self) -> float:
        total = sum(self.statuses.values())
        return self.statuses.get(200, 0) / total if total else 0.0


def probe(
    url: str, body: bytes, headers: dict[str, str], seconds: float, clients: int = 4, path: str = "/v1/predict"
) -> Probe:
    """``clients`` threads posting ``body`` over keep-alive connections for ``seconds``, one request at a time each."""
    host, port = host_port(url)
    out = Probe()
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        while time.monotonic() < end:
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body, headers)
                resp = conn.getresponse()
                resp.read()
                status: int | str = resp.status
            except (OSError, http.client.HTTPException) as exc:
                status = type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
            with lock:
                out.pairs.append((status, (time.perf_counter() - t0) * 1000))
        conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def attacker_pool(processes: int):  # type: ignore[no-untyped-def]
    """Processes for the attackers, at the lowest CPU priority: on a 2-core box they would otherwise take the
    server's cores, which an attacker on the network cannot (what is measured is the server, not the box)."""
    import multiprocessing as mp

    return mp.get_context("spawn").Pool(processes, initializer=os.nice, initargs=(19,))


def p99_allowed(baseline: Probe) -> float:
    """The p99 normal requests may have beside an attack: 250 ms (issue 22, a 2-core machine), or twice what they
    had on this machine just before it when something else already loads it (a shared CI or dev box)."""
    return max(250.0, 2 * baseline.p(99))


def _status_of(data: bytes) -> str:
    if data.startswith(b"HTTP/1.1 "):
        return data[9:12].decode()
    return "closed" if not data else "garbage"


async def _slow(host: str, port: int, head: bytes, trickle: bytes, until: float, out: Counter, cut: list) -> None:
    """One slow sender: ``head`` at once, then ``trickle`` a byte a second until answered, closed, or ``until``."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        out["connect_failed"] += 1
        return
    t0 = time.monotonic()
    writer.write(head)
    answer = asyncio.ensure_future(reader.read(65536))
    i = 0
    while time.monotonic() < until and not answer.done():
        await asyncio.wait({answer}, timeout=1.0)
        if not answer.done() and not writer.is_closing():
            writer.write(trickle[i % len(trickle) : i % len(trickle) + 1])
            i += 1
    if answer.done():
        try:
            out[_status_of(answer.result())] += 1
        except ConnectionResetError:
            out["reset"] += 1
        cut.append(time.monotonic() - t0)
    else:
        answer.cancel()
        out["open"] += 1
    writer.close()


async def _hold_all(host: str, port: int, slow_bodies: int, slowloris: int, seconds: float) -> dict:
    until = time.monotonic() + seconds
    out: Counter[str] = Counter()
    cut: list[float] = []
    body_head = (
        b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nContent-Length: 100000\r\n\r\n\xff"
    )
    lori_head = b"POST /v1/predict HTTP/1.1\r\nHost: x\r\n"
    tasks = []
    for i in range(slow_bodies + slowloris):  # connect in waves: the listen backlog is 2048
        head, trickle = (body_head, b"\xd8") if i < slow_bodies else (lori_head, b"X-Slow: a\r\n")
        tasks.append(asyncio.ensure_future(_slow(host, port, head, trickle, until, out, cut)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)
    await asyncio.gather(*tasks)
    return {"outcomes": dict(out), "cut_after_s": sorted(cut)}


def hold(url: str, slow_bodies: int, slowloris: int, seconds: float) -> dict:
    """In a process of its own: hold that many slow connections for at most ``seconds``; how each one ended."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = host_port(url)
    return asyncio.run(_hold_all(host, port, slow_bodies, slowloris, seconds))


def send_then_read(url: str, head: bytes, size: int, chunk: int = 1 << 20) -> tuple[str, float, bytes]:
    """Send ``head`` then ``size`` bytes of filler while another thread reads: (status, seconds to the answer, body).
    The filler goes on after the answer (the server must not parse it); the answer's time is what is measured."""
    import socket

    host, port = host_port(url)
    sock = socket.create_connection((host, port), timeout=30)
    t0 = time.perf_counter()
    got: list[tuple[bytes, float]] = []

    def read() -> None:
        data = b""
        try:
            while True:
                more = sock.recv(65536)
                if not more:
                    break
                if not data:
                    got.append((b"", time.perf_counter() - t0))
                data += more
        except OSError:
            pass
        got.append((data, 0.0))

    reader = threading.Thread(target=read)
    reader.start()
    filler = b"a" * chunk
    try:
        sock.sendall(head)
        sent = 0
        while sent < size:
            sock.sendall(filler)
            sent += chunk
    except OSError:
        pass  # the server closed after answering: what matters is that the answer arrived
    with contextlib.suppress(OSError):  # already reset, after the 1 MB the server reads past a refusal
        sock.shutdown(socket.SHUT_WR)
    reader.join(30)
    sock.close()
    data, first = got[-1][0], (got[0][1] if len(got) > 1 else float("inf"))
    status = _status_of(data)
    return status, first, data.partition(b"\r\n\r\n")[2]
