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


_SLOW: list[asyncio.Event] = []  # the last one holds /slow's answer (each test's loop makes its own)


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
    if scope["path"] == "/slow":  # answered once the test lets it (``_SLOW``): an answer still being written
        await _SLOW[-1].wait()
    if scope["path"] == "/cut":  # half an answer, then the app returns (uvicorn closes the connection)
        await _SLOW[-1].wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"10")]})
        await send({"type": "http.response.body", "body": b"abc", "more_body": True})
        return
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


def _request(i: int, body: int = 2000) -> bytes:
    return b"POST /x?i=%d HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % (i, body) + b"b" * body


def _responses(calls: list[bytes | str]) -> list[bytes]:
    """Each response whole (a pipelined one's head and body are two writes: only the next one written is held)."""
    return [b"HTTP/1.1" + r for r in b"".join(_writes(calls)).split(b"HTTP/1.1")[1:]]


async def _until(t: _Recorder, n: int, timeout: float = 5.0) -> None:
    """Until the transport has ``n`` responses (or it half-closed, or ``timeout`` passed)."""
    end = time.monotonic() + timeout
    while len(_responses(t.calls)) < n and "EOF" not in t.calls and time.monotonic() < end:
        await asyncio.sleep(0.001)


def test_pipelined_requests_arriving_together_are_not_taken_for_one_large_head():
    """200 pipelined requests in one read of 460 kB, the second one's head across the 64 KiB mark: the header limit
    counts each head, not the read. Before, the first 64 KiB of the read were fed as one head's bytes, and a slice
    that ended inside a later request's head was refused with 431 and the connection closed."""

    async def go() -> list[bytes | str]:
        protocol, t = await _connection()
        first = _request(0, 65_500 - len(_request(0, 0)))  # the next head begins 32 bytes before the limit
        protocol.data_received(first + b"".join(_request(i) for i in range(1, 200)))
        await _until(t, 200)
        return t.calls

    calls = asyncio.run(go())
    assert "EOF" not in calls and "CLOSE" not in calls
    responses = _responses(calls)
    assert len(responses) == 200
    assert responses[0].startswith(b"HTTP/1.1 200 OK") and responses[0].endswith(b'{"got":65448,"whole":1}')
    assert all(r.startswith(b"HTTP/1.1 200 OK") and r.endswith(b'{"got":2000,"whole":1}') for r in responses[1:])


def test_a_head_over_the_limit_after_pipelined_requests_is_still_refused():
    """The count starts again after a request that ended, not never: a large head behind small requests in the
    same read gets 431 once it passes the limit (at most twice it), after the answers before it."""

    async def go() -> list[bytes | str]:
        protocol, t = await _connection()
        big = b"GET /x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * (200 * 1024)
        protocol.data_received(b"".join(_request(i) for i in range(3)) + big)
        await _until(t, 4)
        return t.calls

    calls = asyncio.run(go())
    assert [r[:12] for r in _responses(calls)] == [b"HTTP/1.1 200"] * 3 + [b"HTTP/1.1 431"]
    assert calls[-1] == "EOF" and calls.count("EOF") == 1


@pytest.mark.parametrize(
    ("after", "status"),
    [
        (b"GET /x HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * (140 * 1024), b"431"),  # a head over twice the limit
        (b"\x00\x01 not http\r\n\r\n", b"400"),  # bytes that are not HTTP: uvicorn's 400
        (b"GET /x HTTP/1.1\r\nHost: a\r\n", b"408"),  # headers that stop coming: the header deadline
    ],
)
def test_a_refusal_behind_an_answer_being_written_waits_for_it(after: bytes, status: bytes):
    """A pipelined request is still being answered when the next one is refused: its answer goes out whole, then
    the refusal, then the half-close, and nothing is written after it. Before, the 431 was dropped and the answer
    written after the half-close (uvloop: RuntimeError, a traceback a connection), and uvicorn wrote its 400 in
    between the answer's bytes."""

    async def go() -> tuple[list[bytes | str], list[bytes | str]]:
        _SLOW.append(asyncio.Event())
        protocol, t = await _connection(timeout_s=0.2)
        protocol.data_received(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n" + after)
        await asyncio.sleep(0.4)  # past the header deadline, the answer still not written
        before = list(t.calls)
        _SLOW[-1].set()
        await _until(t, 2)
        return before, t.calls

    before, calls = asyncio.run(go())
    assert before == []  # nothing written while the answer is pending, not even the refusal
    responses = _responses(calls)
    assert len(responses) == 2 and calls[-1] == "EOF" and calls.count("EOF") == 1  # nothing written after it
    assert responses[0].startswith(b"HTTP/1.1 200 OK") and responses[0].endswith(b'{"got":0,"whole":1}')
    assert responses[1].startswith(b"HTTP/1.1 " + status) and b"connection: close" in responses[1]


def test_an_answer_cut_while_a_refusal_waits_closes_at_once():
    """uvicorn closes the transport itself when an app returns in the middle of its answer: a refusal waiting for
    that answer is then not written after half an answer; the connection closes at once."""

    async def go() -> list[bytes | str]:
        _SLOW.append(asyncio.Event())
        protocol, t = await _connection()
        protocol.data_received(b"GET /cut HTTP/1.1\r\nHost: a\r\n\r\n\x00 not http\r\n\r\n")
        await _settle()
        assert t.calls == []
        _SLOW[-1].set()
        await _settle()
        return t.calls

    calls = asyncio.run(go())
    assert calls[-1] == "CLOSE" and "EOF" not in calls
    assert not any(w.startswith(b"HTTP/1.1 400") for w in _writes(calls))


def test_requests_after_a_connection_close_one_are_not_answered_when_a_refusal_waits():
    """Connection: close, then another request, then bytes that are not HTTP: the first is answered, and the
    connection half-closes after it (the second is not started, the 400 not sent: the client asked to close)."""

    async def go() -> list[bytes | str]:
        _SLOW.append(asyncio.Event())
        protocol, t = await _connection()
        protocol.data_received(
            b"GET /slow HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + _request(1) + b"\x00 not http\r\n\r\n"
        )
        await _settle()
        _SLOW[-1].set()
        await _until(t, 2, timeout=0.5)
        return t.calls

    calls = asyncio.run(go())
    assert [r[:12] for r in _responses(calls)] == [b"HTTP/1.1 200"]
    assert calls[-1] == "EOF"


def test_a_bad_chunk_in_the_body_being_read_is_that_requests_400_at_once():
    """A chunked body whose chunk size is not hex: the 400 answers that request now (its app sees the client gone
    and writes nothing), instead of after the body deadline beside the app's own 408."""

    async def go() -> list[bytes | str]:
        protocol, t = await _connection()
        protocol.data_received(b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await _settle()
        protocol.data_received(b"zz\r\nnot a chunk\r\n")
        await _settle()
        return t.calls

    calls = asyncio.run(go())
    writes = _writes(calls)
    assert len(writes) == 1 and calls[-1] == "EOF"
    assert writes[0].startswith(b"HTTP/1.1 400 Bad Request") and b'"error":"bad_request"' in writes[0]
