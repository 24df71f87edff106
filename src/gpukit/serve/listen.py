"""The listening side shared by the one-process server and every HTTP worker: the socket, uvicorn configured with
gpukit's protocol (``gpukit.serve.protocol``: header limit, header deadline, lingering close, clean drain), and the
HTTP workers' least-connections accept (``Acceptor``)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from gpukit.errors import ConfigError
from gpukit.serve.config import ServeConfig

__all__ = [
    "ACCEPT_FALLBACK_S",
    "ACCEPT_RETRY_S",
    "DRAIN_GRACE_S",
    "KEEP_ALIVE_S",
    "Acceptor",
    "ConnectionStats",
    "SharedListener",
    "Stopped",
    "drain_s",
    "listen_socket",
    "raise_open_files_limit",
    "stop_listening",
    "uvicorn_server",
]

KEEP_ALIVE_S = 30  # an idle keep-alive connection is closed (cleanly) after this
DRAIN_GRACE_S = 2.0  # past the request deadline, for the last answers to be written and idle connections closed
ACCEPT_RETRY_S = 0.001  # a worker with more connections than the least loaded one looks again after this
ACCEPT_FALLBACK_S = 0.02  # ... and takes the connection itself once no worker has taken one for this long
ACCEPT_PAUSE_S = 0.1  # out of file descriptors (or kernel memory): accept again after this (asyncio waits 1 s)


@dataclass
class ConnectionStats:
    """Connections of one HTTP process, for the shutdown summary."""

    opened: int = 0
    open_now: int = 0
    header_too_large: int = 0  # answered 431
    header_timeouts: int = 0  # answered 408 before their headers were complete
    lingered: int = 0  # closed with a lingering close (half-close, the rest read and discarded)
    drained: int = 0  # idle keep-alive connections closed cleanly by the drain


@dataclass
class Stopped:
    """How the server ended: the requests admitted and answered (equal after a clean drain) and the connections,
    summed over the HTTP processes (with ``--workers N``: those that exited cleanly and sent their counts)."""

    admitted: int
    answered: int
    answered_ok: int
    cancelled: int
    connections: int = 0  # accepted over the server's life
    drained: int = 0  # idle keep-alive connections closed cleanly by the drain
    header_refused: int = 0  # answered 431 (headers too large) or 408 (headers too slow)
    processes: int = 1  # HTTP processes whose counts these are

    @classmethod
    def of(cls, core: Any, stats: Any) -> Stopped:
        """One HTTP process's counts: its ``Core`` and its uvicorn's ``ConnectionStats``."""
        refused = stats.header_too_large + stats.header_timeouts
        return cls(core.admitted, core.answered, core.answered_ok, core.cancelled, stats.opened, stats.drained, refused)

    @classmethod
    def total(cls, parts: list[dict[str, int]]) -> Stopped:
        names = [f.name for f in fields(cls) if f.name != "processes"]
        return cls(**{n: sum(p.get(n, 0) for p in parts) for n in names}, processes=len(parts))


def drain_s(config: ServeConfig) -> float:
    """The longest a SIGTERM takes to end the server: every admitted request ends by its deadline."""
    try:
        from gpukit.serve.protocol import DRAIN_IDLE_S, LINGER_S
    except ImportError:  # no httptools: uvicorn's h11 protocol, no lingering close
        return config.timeout_s + DRAIN_GRACE_S
    return config.timeout_s + DRAIN_GRACE_S + DRAIN_IDLE_S + LINGER_S


def listen_socket(host: str, port: int) -> socket.socket:
    """The listening socket (with ``--workers N``, made once and shared by every HTTP worker: ``Acceptor``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", hint="choose another --port") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def stop_listening(sock: socket.socket) -> None:
    """Stop the listening socket for every process that holds a copy of it, at once, then close this copy: the
    server's first step of a drain with ``--workers N``, before it tells the workers to drain.

    Closing one copy is not enough: the socket listens until its last copy closes, and the workers close theirs one
    after another as they drain. A client that a draining worker answered with ``Connection: close`` and that
    reconnected meanwhile was put in the backlog of a socket about to close, and the close reset it (the kernel
    resets connections no one accepted). ``shutdown`` ends listening for all copies (Linux): from then on a new
    connection is refused, before any worker drains. The workers' ``Acceptor`` then finds accept failing (EINVAL)
    and closes its copy."""
    with contextlib.suppress(OSError):  # not listening, or a system whose listeners do not shut down: close stops it
        sock.shutdown(socket.SHUT_RD)
    sock.close()


def raise_open_files_limit() -> int:
    """Raise this process's open-files soft limit to its hard limit (thousands of connections each need one)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft
    return hard


@dataclass
class SharedListener:
    """What one HTTP worker of a several-process server accepts from: the listening socket every worker shares, and
    one int per worker in shared memory (``multiprocessing.RawArray``), ``counts[index]`` this worker's: its open
    connections, -1 while it does not accept (starting, draining, dead). ``all_up`` (a ``RawValue``) turns 1 once
    every worker has accepted at the server's start, and stays 1."""

    sock: socket.socket
    counts: Any
    index: int
    all_up: Any = None


class Acceptor:
    """Least-connections accept for the HTTP workers (uvicorn sees an asyncio ``Server``: ``close``, ``wait_closed``).

    Why: with a socket of its own per worker (``SO_REUSEPORT``), the kernel hashes each connection to a worker,
    whatever that worker already holds. Keep-alive connections stay where they land, so a reverse proxy's few
    upstream connections leave workers idle (a hash of 8 onto 8 workers leaves 2.75 idle on average) while others queue;
    on an H200 the 8 workers of a seed-CNN server under 64 connections ran at 0.39 to 0.81 cores each
    (benchmarks/serve-accept_cpu_2026-12-05.md).

    Here every worker's event loop watches the one listening socket. Woken by a connection, a worker takes it only
    while it holds no more open connections than the least loaded accepting worker (the counts in shared memory);
    the others look again after ``ACCEPT_RETRY_S`` instead of waking on it again and again. So N connections end
    within one of N / workers on every worker. A worker that should take a connection but does not (its loop busy for
    long) holds up no one for more than ``ACCEPT_FALLBACK_S``: when the total of open connections has not moved
    for that long, a waiting worker takes it itself. One connection is taken per wake-up. The price: every worker
    wakes for each new connection, 100-150 µs more of the workers' CPU per connection on 4 workers of a 2-core VM;
    a kept-alive connection pays it once."""

    def __init__(self, share: SharedListener, make_protocol: Callable[[], asyncio.Protocol]) -> None:
        self.sock, self.counts, self.index = share.sock, share.counts, share.index
        self.make_protocol = make_protocol
        self.loop = asyncio.get_running_loop()
        self.fd = self.sock.fileno()
        self.open = 0  # accepted here and not yet closed
        self.waiting: tuple[float, int] | None = None  # (since, total open then): this worker let a connection wait
        self.closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.sock.setblocking(False)
        self.counts[self.index] = 0
        self.loop.add_reader(self.fd, self._readable)

    def my_turn(self) -> bool:
        """Whether this worker takes the waiting connection now."""
        live = [c for c in self.counts if c >= 0]
        if not live or self.open <= min(live):
            self.waiting = None
            return True
        now, total = time.monotonic(), sum(live)
        if self.waiting is None or self.waiting[1] != total:  # a new wait, or someone took one meanwhile
            self.waiting = (now, total)
            return False
        if now - self.waiting[0] < ACCEPT_FALLBACK_S:
            return False
        self.waiting = None
        return True

    def _readable(self) -> None:
        if self.closed:
            return
        if not self.my_turn():
            self._pause(ACCEPT_RETRY_S)
            return
        try:
            conn, _ = self.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return  # another worker took it, or its client gave up
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # the server stopped listening (stop_listening): the drain comes next
                self.close()
                return
            self._pause(ACCEPT_PAUSE_S)  # out of file descriptors (EMFILE, ENFILE) or kernel memory
            return
        conn.setblocking(False)
        self.open += 1
        self.counts[self.index] = self.open
        task = self.loop.create_task(self._connect(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _pause(self, seconds: float) -> None:
        self.loop.remove_reader(self.fd)
        self.loop.call_later(seconds, self._resume)

    def _resume(self) -> None:
        if not self.closed:
            self.loop.add_reader(self.fd, self._readable)

    async def _connect(self, conn: socket.socket) -> None:
        """The connection's transport and protocol; its count is given back once, when it closes."""
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.open -= 1
                if not self.closed:
                    self.counts[self.index] = self.open

        def make() -> asyncio.Protocol:
            protocol = self.make_protocol()
            lost = protocol.connection_lost

            def connection_lost(exc: Exception | None) -> None:
                try:
                    lost(exc)
                finally:
                    release()

            protocol.connection_lost = connection_lost  # type: ignore[method-assign]  # this connection's only
            return protocol

        try:
            await self.loop.connect_accepted_socket(make, conn)
        except Exception:  # closed before its transport was made (or the loop is closing)
            conn.close()
            release()

    def close(self) -> None:
        """Stop accepting (the drain); the connections open go on. This worker's copy of the socket is closed."""
        if self.closed:
            return
        self.closed = True
        self.counts[self.index] = -1
        self.loop.remove_reader(self.fd)
        self.sock.close()

    async def wait_closed(self) -> None:
        return None


def uvicorn_server(
    app: Any, config: ServeConfig, on_exit: Callable[[], None], share: SharedListener | None = None
) -> Any:
    """uvicorn with gpukit's protocol and drain; ``share``: an HTTP worker's socket, served by an ``Acceptor``
    (``server.run(sockets=[share.sock])``)."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        connection_stats: ConnectionStats

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            if share is None:
                await super().startup(sockets)
                return
            await super().startup([])  # the lifespan, and no listener of uvicorn's own
            config, loop = self.config, asyncio.get_running_loop()

            def make_protocol() -> asyncio.Protocol:  # as uvicorn's own startup makes them
                return config.http_protocol_class(  # type: ignore[call-arg,no-any-return]
                    config=config, server_state=self.server_state, app_state=self.lifespan.state, _loop=loop
                )

            self.servers = [Acceptor(share, make_protocol)]  # type: ignore[list-item]

        def handle_exit(self, sig: int, frame: Any) -> None:
            if share is not None and sig == signal.SIGINT:
                return  # Ctrl-C reaches every process: the server's own stops listening for all, then sends SIGTERM
            super().handle_exit(sig, frame)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list) and sig in captured:
                captured.remove(sig)  # a clean drain exits 0 (uvicorn would re-raise the signal after it)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # the listener closes first, then requests hear "draining" (503, Connection: close): a client that
            # reconnects after that is refused, never accepted into a backlog that the close would reset
            for listener in self.servers:
                listener.close()
            on_exit()
            await super().shutdown(sockets)

    stats = ConnectionStats()
    try:
        from gpukit.serve.protocol import protocol_class

        http: Any = protocol_class(min(config.timeout_s, 60.0), stats)
    except ImportError:  # no httptools: uvicorn's h11, whose header limit answers 400 (no lingering close)
        http = "h11"
    cfg = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        access_log=False,
        loop="auto",
        http=http,
        timeout_graceful_shutdown=int(config.timeout_s + DRAIN_GRACE_S + 1),
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=64 * 1024,
    )
    server = DrainingServer(cfg)
    server.connection_stats = stats
    return server
