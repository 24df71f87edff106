"""The listening side shared by the one-process server and every HTTP worker: the socket, and uvicorn configured
with gpukit's protocol (``gpukit.serve.protocol``: header limit, header deadline, lingering close, clean drain)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from gpukit.errors import ConfigError
from gpukit.serve.config import ServeConfig

__all__ = [
    "DRAIN_GRACE_S",
    "KEEP_ALIVE_S",
    "ConnectionStats",
    "Stopped",
    "drain_s",
    "listen_socket",
    "raise_open_files_limit",
    "uvicorn_server",
]

KEEP_ALIVE_S = 30  # an idle keep-alive connection is closed (cleanly) after this
DRAIN_GRACE_S = 2.0  # past the request deadline, for the last answers to be written and idle connections closed


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


def listen_socket(host: str, port: int, reuse_port: bool = False, listen: bool = True) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", hint="choose another --port") from None
    if listen:
        sock.listen(2048)
    sock.set_inheritable(True)
    return sock


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


def uvicorn_server(app: Any, config: ServeConfig, on_exit: Callable[[], None]) -> Any:
    import uvicorn

    class DrainingServer(uvicorn.Server):
        connection_stats: ConnectionStats

        def handle_exit(self, sig: int, frame: Any) -> None:
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
