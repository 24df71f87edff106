"""uvicorn's httptools protocol with the limits a server facing hostile clients needs, which uvicorn does not offer
for httptools (it has only ``h11_max_incomplete_event_size`` for h11, answered with a plain 400, and no deadline
on receiving a request: its keep-alive timer is reset by every byte, so a client sending one byte a second holds a
connection for ever; uvicorn issue #157):

- **Header size**: at most ``HEADER_LIMIT_BYTES`` (64 KiB) of request line and headers are fed to the parser; past
  that the client gets 431 (JSON) and the rest is never parsed (nginx's ``large_client_header_buffers``). A read is
  fed in slices of what is left of the limit; a slice in which a request ended starts the count again, so pipelined
  requests that arrive together are not taken for one large head (a head that began inside such a slice may reach
  twice the limit before it is refused).
- **Header deadline**: the headers must be complete within ``header_timeout_s`` of the connection's first byte (or
  of the request's first byte on a kept-alive connection), else 408 (nginx's ``client_header_timeout``). The body's
  deadline is the request's own (``--timeout-s``), enforced by the app.
- **Lingering close**: a connection closed while the client may still be sending (an early 413/401/503, a 408, the
  drain) is half-closed after the response and what still arrives is read and discarded, up to ``LINGER_BYTES``
  (``LINGER_REFUSED_BYTES`` after a 431/408/400) or ``LINGER_S``; closing at once would make the kernel answer the
  unread bytes with a reset, and clients that send the whole body before reading (urllib, http.client) would never
  see the JSON answer (nginx's lingering close).
- **A refusal behind answers**: a refusal (431, 408, uvicorn's 400 for bytes that are not HTTP) that comes while
  earlier pipelined requests of the connection are still to be answered waits for them: their answers, then the
  refusal, then the half-close. Before, uvicorn wrote its 400 in between an answer's bytes, the 431 was dropped, the
  requests read but not started were never answered, and the answer being written went out after the half-close,
  which uvloop refuses with a RuntimeError (a traceback for each).
- **Drain**: on shutdown an idle keep-alive connection is not cut at once (a request may be on its way: cutting
  would reset it); for ``DRAIN_IDLE_S`` a request that arrives is answered (503 while draining) with
  ``Connection: close``, then the connection is closed cleanly. Busy connections finish their response, then close.
- **Client gone**: a request whose client disconnected before its answer gets ``scope["gpukit.client_gone"]``, so
  the app counts it as 499, not as answered, and the callbacks the app put in ``scope["gpukit.on_gone"]`` run (on
  the loop): a request still waiting in the batch queue is taken out of it unrun. That holds for every request of
  the connection still unanswered, also the earlier ones of pipelined requests: uvicorn marks only the last one
  disconnected, and an earlier one's answer was then written to the closed transport, which uvloop refuses with a
  RuntimeError (a traceback in the log for each, and the request run in full).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # ImportError without httptools

if TYPE_CHECKING:
    from gpukit.serve.listen import ConnectionStats

__all__ = [
    "DRAIN_IDLE_S",
    "HEADER_LIMIT_BYTES",
    "LINGER_BYTES",
    "LINGER_S",
    "GuardedProtocol",
    "protocol_class",
]

HEADER_LIMIT_BYTES = 64 * 1024
LINGER_BYTES = 256 * 2**20  # what a lingering close reads and discards at most (a 64 MB upload is answered)
LINGER_REFUSED_BYTES = 2**20  # after a 431/408/400: no ordinary client is still sending a body then
LINGER_S = 5.0
DRAIN_IDLE_S = 0.5

_REASONS = {
    400: b"Bad Request",
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class _Transport:
    """The real transport, except that ``close()`` is the protocol's lingering close, that it counts as closing when
    the protocol says so (``closing``: once it half-closed; uvicorn then starts no pipelined request on it), and that
    a response's head can wait for its body (``hold``).

    uvicorn writes a response's status line and headers at ``http.response.start`` and its body at
    ``http.response.body``: two sends, two TCP segments, and two wake-ups of the client for one small answer. Held,
    the head leaves with the body's first bytes in one send; ``release`` sends it alone when no body write comes
    (a HEAD request, an empty or cut response), before a close, and when the response is complete."""

    def __init__(self, real: asyncio.Transport, close: Any, closing: Any) -> None:
        self._real = real
        self.write = real.write  # the hot path, without __getattr__ (``hold`` swaps it for one response)
        self._held = b""
        self._close = close
        self.is_closing = closing

    def hold(self) -> None:
        """The next write (a response's head) waits for the one after it."""
        self.write = self._hold  # type: ignore[assignment]  # uvicorn writes bytes

    def _hold(self, data: bytes) -> None:
        if data.startswith(b"HTTP/1.1 1"):  # 100 Continue: the client waits for it before sending its body
            self._real.write(data)
            return
        self._held = data
        self.write = self._join  # type: ignore[assignment]

    def _join(self, data: bytes) -> None:
        held, self._held = self._held, b""
        self.write = self._real.write
        self._real.write(held + data)

    def release(self) -> None:
        """Send a held head now (alone), and hold nothing more."""
        self.write = self._real.write
        if self._held:
            held, self._held = self._held, b""
            self._real.write(held)

    def close(self) -> None:
        self.release()
        self._close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _disconnect(cycle: Any) -> None:
    """uvicorn's request ``cycle`` as if its client had gone: its app's ``receive`` returns a disconnect and its
    answer is not written."""
    cycle.disconnected = True
    cycle.message_event.set()


def _response(status: int, code: str, detail: str) -> bytes:
    body = json.dumps({"error": code, "detail": detail}, separators=(",", ":")).encode()
    head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
    return head % (status, _REASONS[status], len(body)) + body


class GuardedProtocol(HttpToolsProtocol):  # type: ignore[misc]
    """uvicorn's httptools protocol with the limits above; ``protocol_class`` binds its settings."""

    header_timeout_s: float = 10.0
    stats: ConnectionStats

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._real = transport
        self._in_head, self._head_bytes = True, 0
        self._closing = self._discarding = self._lost = self._draining = False
        self._discarded, self._linger_bytes = 0, LINGER_BYTES
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_t0: float | None = None  # when this request's first byte came (None: none in head yet)
        self._timers: list[asyncio.TimerHandle] = []
        self._earlier: list[Any] = []  # pipelined: requests before ``self.cycle`` not yet answered
        self._messages = 0  # requests whose bytes were all parsed (the header limit's count restarts after one)
        self._refusal = b""  # a refusal, written once the requests read before it are answered (``_half_close``)
        self._eof_sent = False
        self._wrapped = _Transport(transport, self._linger_close, self._shut)
        super().connection_made(cast("asyncio.Transport", self._wrapped))
        self.stats.opened += 1
        self.stats.open_now += 1
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.stats.open_now -= 1
        for timer in [self._head_timer, *self._timers]:
            if timer is not None:
                timer.cancel()
        for cycle in self._unanswered():
            scope = cast("dict[str, Any]", cycle.scope)
            scope["gpukit.client_gone"] = True
            for callback in scope.get("gpukit.on_gone", ()):
                callback()
            _disconnect(cycle)  # its answer is not written (uvicorn marks ``self.cycle`` only)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            self._discarded += len(data)
            if self._discarded > self._linger_bytes:
                self._real.close()
            return
        while data and not self._closing:
            if not self._in_head:
                super().data_received(data)
                break
            if len(data) <= (room := HEADER_LIMIT_BYTES - self._head_bytes):
                self._head_bytes += len(data)
                super().data_received(data)
                break
            messages = self._messages
            super().data_received(data[:room])  # may end the headers; if not, the rest is never parsed
            if self._closing:
                return
            if self._in_head and self._messages == messages:  # one head, not ended within the limit
                self.stats.header_too_large += 1
                self._refuse(431, "headers_too_large", f"request line and headers over {HEADER_LIMIT_BYTES} bytes")
                return
            data = data[room:]  # the rest, after a head that ended or a request that did (the count starts again)
        if self._in_head and self._head_t0 is not None and not self._closing:  # a request's headers are not all in
            self._arm_head_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_t0 = self.loop.time()  # the header deadline runs from here; armed only if they are not all in

    def on_headers_complete(self) -> None:
        self._in_head, self._head_t0 = False, None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        before = self.cycle
        super().on_headers_complete()
        if before is not None and not before.response_complete and self.cycle is not before:  # pipelined
            self._earlier.append(before)
        if self._draining and self.cycle is not None:
            self.cycle.keep_alive = False  # answered (503 while draining), then closed
        if self.cycle is not None and not self.pipeline:  # this request's response is the next one written
            self._wrapped.hold()

    def on_response_complete(self) -> None:
        self._wrapped.release()  # a head still held (no body was written) leaves now
        if self._earlier:
            self._earlier = [cycle for cycle in self._earlier if not cycle.response_complete]
        if self._closing and not self._eof_sent and self._answering() is None:
            self._half_close()  # the answers a close was waiting for are out
        super().on_response_complete()

    def _shut(self) -> bool:
        """Whether nothing more is written here (uvicorn's ``transport.is_closing()``): a close that waits for the
        requests already read to be answered (``_linger_close``) lets uvicorn start them in turn."""
        return self._eof_sent or self._real.is_closing() or (self._closing and not self._refusal)

    def _unanswered(self) -> list[Any]:
        """The requests read and not yet answered, in their order (uvicorn answers them in turn)."""
        return [c for c in (*self._earlier, self.cycle) if c is not None and not c.response_complete]

    def _answering(self) -> Any:
        """The first request whose answer is still to be written, or None."""
        return next((c for c in self._unanswered() if not c.disconnected), None)

    def send_400_response(self, msg: str) -> None:
        """Bytes that are not HTTP: uvicorn's 400, as JSON, after the answers still being written. Bytes that break
        the body of the request being read (a bad chunk) make the 400 that request's answer: its app sees the client
        gone (no answer of its own is written) instead of waiting for the rest of its body until its deadline."""
        cycle = self.cycle
        if not self._in_head and cycle is not None and not cycle.response_started and not cycle.response_complete:
            cast("dict[str, Any]", cycle.scope)["gpukit.refused"] = 400  # the route counts it so, not as gone (499)
            _disconnect(cycle)
        self._refuse(400, "bad_request", msg)

    def on_message_complete(self) -> None:
        # the app reads the whole body without waiting (route._body)
        cast("dict[str, Any]", self.scope)["gpukit.body_complete"] = True
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0
        self._messages += 1

    def _arm_head_timer(self) -> None:
        """The header deadline: from the connection's start, or from the request's first byte (``_head_t0``). It is
        armed only for headers that did not all come in one read: the common request costs no timer."""
        if self._head_timer is None and self.header_timeout_s > 0:
            spent = self.loop.time() - self._head_t0 if self._head_t0 is not None else 0.0
            self._head_timer = self.loop.call_later(max(0.0, self.header_timeout_s - spent), self._head_timeout)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self._in_head and not self._closing:
            self.stats.header_timeouts += 1
            detail = f"the request headers were not complete within {self.header_timeout_s:g} s"
            self._refuse(408, "header_timeout", detail)

    def _refuse(self, status: int, code: str, detail: str) -> None:
        """Refuse (JSON) what does not make a request (a head too large or too slow, bytes that are not HTTP), and
        close without parsing further: behind the answers of the requests read before it (never between their
        bytes)."""
        if self._closing:
            return
        self._refusal = _response(status, code, detail)
        self._linger_bytes = LINGER_REFUSED_BYTES
        self.transport.close()

    def _linger_close(self) -> None:
        """Close, reading and discarding what the client still sends; once every request read is answered."""
        real = self._real
        if self._closing:  # uvicorn closes while a refusal waits: after an answer it cut, or a Connection: close one
            if not self._eof_sent:
                cycle = self._answering()
                if cycle is not None and cycle.response_started:
                    real.close()  # cut in the middle: no refusal after half an answer
                else:
                    self._half_close()  # the requests after a Connection: close answer are not answered
            return
        self._closing = True
        if self._lost or real.is_closing() or not real.can_write_eof():
            real.close()
            return
        self._discarding = True  # nothing more is parsed: what still arrives is read and discarded
        self.flow.resume_reading()
        if not self._refusal or self._answering() is None:  # only a refusal waits for the requests read before it
            self._half_close()

    def _half_close(self) -> None:
        self._eof_sent = True
        real = self._real
        if real.is_closing():
            return
        if self._refusal:
            real.write(self._refusal)
        self.stats.lingered += 1
        real.write_eof()  # the responses already written, then FIN; the client's remaining bytes are discarded
        self._timers.append(self.loop.call_later(LINGER_S, real.close))

    def shutdown(self) -> None:
        """The server is draining (uvicorn calls this on every connection)."""
        self._draining = True
        if self.cycle is None or self.cycle.response_complete:
            self._timers.append(self.loop.call_later(DRAIN_IDLE_S, self._close_idle))
        else:
            self.cycle.keep_alive = False

    def _close_idle(self) -> None:
        if self._closing:
            return
        if (self.cycle is None or self.cycle.response_complete) and self._head_bytes == 0:
            self.stats.drained += 1
            self.transport.close()
        elif self._in_head:  # half a request after the drain began: the header deadline ends it
            self._refuse(503, "draining", "the server is shutting down; retry on another replica")

    def timeout_keep_alive_handler(self) -> None:
        self.transport.close()


def protocol_class(header_timeout_s: float, stats: ConnectionStats) -> type[asyncio.Protocol]:
    """``GuardedProtocol`` with this server's header deadline and counters, for ``uvicorn.Config(http=...)``."""
    attrs = {"header_timeout_s": header_timeout_s, "stats": stats}
    return type("GuardedProtocol", (GuardedProtocol,), attrs)
