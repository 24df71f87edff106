"""gpukit's HTTP protocol (``gpukit.serve.protocol``) over a transport that records every write: a response's head
leaves with its body in one send, and nothing that must go out alone waits."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("httptools")
pytest.importorskip("uvicorn")

from gpukit.serve.config import ServeConfig
from gpukit.serve.listen import uvicorn_server


class _Recorder(asyncio.Transport):
    """What the protocol writes, one entry per call; "EOF" / "CLOSE" where it half-closes or closes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[bytes | str] = []
        self.closing = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.calls.append(bytes(data))

    def write_eof(self) -> None:
        self.calls.append("EOF")

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.calls.append("CLOSE")
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the body; answers its length and whether it was all in when the app began (JSON), or three chunks for
    /stream."""
    if scope["type"] != "http":
        return
    whole = bool(scope.get("gpukit.body_complete"))  # as the route sees it before reading
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            break
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for part in (b"one,", b"two,", b"three"):
            await send({"type": "http.response.body", "body": part, "more_body": part != b"three"})
        return
    payload = b'{"got":%d,"whole":%d}' % (len(body), whole)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _connection(timeout_s: float = 30.0) -> tuple[Any, _Recorder]:
    server = uvicorn_server(_app, ServeConfig(model=Path("unused"), timeout_s=timeout_s), lambda: None)
    cfg = server.config
    cfg.load()
    from uvicorn.server import ServerState

    state = ServerState()
    protocol = cfg.http_protocol_class(config=cfg, server_state=state, app_state={}, _loop=asyncio.get_running_loop())
    transport = _Recorder()
    protocol.connection_made(transport)
    return protocol, transport


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _writes(calls: list[bytes | str]) -> list[bytes]:
    return [c for c in calls if isinstance(c, bytes)]


def _one_request(raw: bytes) -> list[bytes | str]:
    """A new connection given ``raw`` in one read: every call the protocol then made on its transport."""

    async def go() -> list[bytes | str]:
        protocol, t = await _connection()
        protocol.data_received(raw)
        await _settle()
        return t.calls

    return asyncio.run(go())


def test_a_response_is_one_write_and_keepalive_requests_each_get_theirs():
    async def go() -> list[bytes]:
        protocol, t = await _connection()
        for _ in range(2):
            protocol.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
            await _settle()
        protocol.connection_lost(None)
        return _writes(t.calls)

    writes = asyncio.run(go())
    assert len(writes) == 2  # uvicorn alone: four (each head, then each body)
    for w in writes:
        assert w.startswith(b"HTTP/1.1 200 OK\r\n") and w.endswith(b'\r\n\r\n{"got":5,"whole":1}')


def test_a_head_response_without_a_body_write_still_leaves():
    writes = _writes(_one_request(b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n"))
    assert len(writes) == 1 and writes[0].startswith(b"HTTP/1.1 200 OK\r\n") and writes[0].endswith(b"\r\n\r\n")


def test_100_continue_goes_out_at_once_and_the_answer_after_the_body():
    async def go() -> tuple[list[bytes], list[bytes]]:
        protocol, t = await _connection()
        head = b"POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n"
        protocol.data_received(head)
        await _settle()
        before_body = _writes(t.calls)  # the client sends its body only once it has this
        protocol.data_received(b"abc")
        await _settle()
        return before_body, _writes(t.calls)

    before_body, writes = asyncio.run(go())
    assert before_body == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    assert len(writes) == 2 and writes[1].startswith(b"HTTP/1.1 200 OK") and writes[1].endswith(b'{"got":3,"whole":0}')


def test_a_streamed_response_joins_its_head_to_the_first_chunk_only():
    writes = _writes(_one_request(b"GET /stream HTTP/1.1\r\nHost: a\r\n\r\n"))
    assert len(writes) == 3
    assert writes[0].startswith(b"HTTP/1.1 200 OK") and writes[0].endswith(b"\r\n\r\n4\r\none,\r\n")
    assert writes[1:] == [b"4\r\ntwo,\r\n", b"5\r\nthree\r\n0\r\n\r\n"]


def test_connection_close_writes_the_answer_before_the_half_close():
    calls = _one_request(b"POST /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi")
    assert len(calls) == 2 and calls[1] == "EOF"
    assert isinstance(calls[0], bytes) and calls[0].endswith(b'{"got":2,"whole":1}')


def test_a_refused_head_is_answered_alone():
    """431 before the headers are complete: written at once (nothing is held before a request's headers end)."""
    calls = _one_request(b"GET /x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * (70 * 1024))
    assert isinstance(calls[0], bytes) and calls[0].startswith(b"HTTP/1.1 431 ") and calls[1] == "EOF"


def test_a_body_still_coming_is_not_said_complete_and_a_whole_request_sets_no_header_timer():
    """``gpukit.body_complete`` (the route then reads without a timer) only once the whole body is in; a kept-alive
    request that comes in one read arms no header deadline."""

    async def go() -> tuple[list[bytes], Any]:
        protocol, t = await _connection()
        protocol.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nabc")
        await _settle()
        protocol.data_received(b"def")  # the body's rest, after the app began reading
        await _settle()
        protocol.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
        timer = protocol._head_timer
        await _settle()
        return _writes(t.calls), timer

    writes, timer = asyncio.run(go())
    assert writes[0].endswith(b'{"got":6,"whole":0}') and writes[1].endswith(b'{"got":2,"whole":1}')
    assert timer is None


def test_a_kept_alive_request_whose_headers_trickle_gets_408_at_its_deadline():
    """Slowloris on a kept-alive connection: the second request's headers start and stop coming; the deadline runs
    from its first byte (the protocol's header timeout is min(--timeout-s, 60))."""

    async def go() -> tuple[list[bytes | str], float]:
        protocol, t = await _connection(timeout_s=0.3)
        protocol.data_received(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
        await _settle()
        t0 = time.monotonic()
        protocol.data_received(b"GET /x HTTP/1.1\r\nHost: a\r\n")
        while "EOF" not in t.calls and time.monotonic() - t0 < 5:
            await asyncio.sleep(0.01)
            protocol.data_received(b"X-Slow: 1\r\n") if time.monotonic() - t0 < 0.2 else None  # still trickling
        return t.calls, time.monotonic() - t0

    calls, took = asyncio.run(go())
    assert isinstance(calls[1], bytes) and calls[1].startswith(b"HTTP/1.1 408 ") and calls[2] == "EOF"
    assert 0.25 <= took < 1.0, took
