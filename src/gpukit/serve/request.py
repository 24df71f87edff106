"""Reading a request body safely: the size limit checked while reading, the content type on an allow-list, and a
small strict multipart/form-data splitter (images are the only fields we want, so no general form parser is needed).

The splitter finds the delimiters with ``bytes.find`` and copies each file's bytes once (a 224 px JPEG form: 5.5 µs
with the content-type checks, where python-multipart's streaming parser alone took 12.5 µs on the same 2-core machine:
``benchmarks/serve-http-cpu_2026-12-02.md``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["RAW_TYPES", "ClientGone", "RequestRejected", "images_from_body", "read_body"]

# Content types accepted for a raw body (the bytes are sniffed again after: the header is only a claim).
RAW_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp", "application/octet-stream"})
_BOUNDARY = re.compile(r'boundary="?([^";]{1,200})"?', re.I)
_NAME = re.compile(rb'\bname="([^"]*)"', re.I)
MAX_PARTS = 256


@dataclass
class RequestRejected(Exception):
    """A request refused with a 4xx (or 503/504): the status, a short code and a message naming the problem."""

    status: int
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"error": self.code, "detail": self.message}


class ClientGone(Exception):
    """The client closed its connection before its answer (counted as 499)."""


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


async def read_body(receive: Callable[[], Awaitable[Any]], content_length: bytes | str | None, limit: int) -> bytes:
    """The whole body from the ASGI ``receive``, refused with 413 as soon as it passes ``limit`` (a declared length
    over it is refused unread); ``ClientGone`` when the client disconnects first."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise RequestRejected(400, "bad_length", "Content-Length is not a number") from None
        if declared > limit:
            raise RequestRejected(413, "too_large", f"body of {declared} bytes is over the limit of {limit}")
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:  # checked per chunk: an oversize body is never held whole; the connection then closes
                parts.clear()  # with a lingering close (gpukit.serve.protocol), so the client still reads the 413
                raise RequestRejected(413, "too_large", f"body is over the limit of {limit} bytes")
            parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


def images_from_body(content_type: str, body: bytes, many: bool) -> list[bytes]:
    """The image bytes in a request: a raw body of an allowed image type, or the file fields of a multipart form."""
    kind = media_type(content_type)
    if kind == "multipart/form-data":
        files = _split_multipart(content_type, body)
        if not files:
            raise RequestRejected(400, "no_file", "the form has no file field (send the image as field 'file')")
        if not many and len(files) > 1:
            raise RequestRejected(400, "many_files", "one image per request here; use /v1/predict/batch for several")
        return files
    if kind in RAW_TYPES or kind == "":
        if not body:
            raise RequestRejected(400, "empty", "the body is empty")
        return [body]
    raise RequestRejected(415, "unsupported_type", f"content type {kind!r} is not accepted (send an image)")


def _delimiters(body: bytes, delim: bytes) -> list[tuple[int, int]]:
    """(start, end) of every ``CRLF--boundary`` in ``CRLF + body`` (body offsets: the first may start at -2)."""
    found: list[tuple[int, int]] = []
    pos = 0
    if body.startswith(delim[2:]):
        found.append((-2, len(delim) - 2))
        pos = len(delim) - 2
    while (i := body.find(delim, pos)) >= 0:
        found.append((i, i + len(delim)))
        pos = i + len(delim)
    return found


def _split_multipart(content_type: str, body: bytes) -> list[bytes]:
    m = _BOUNDARY.search(content_type)
    if not m:
        raise RequestRejected(400, "bad_form", "multipart body without a boundary")
    # RFC 2046: a delimiter is CRLF "--" boundary, so a part's content may hold "--boundary" not after a CRLF
    delims = _delimiters(body, b"\r\n--" + m.group(1).encode("latin-1"))
    if len(delims) < 2 or not body.startswith(b"--", delims[-1][1]):
        raise RequestRejected(400, "bad_form", "multipart body is truncated (no closing boundary)")
    if len(delims) - 1 > MAX_PARTS:
        raise RequestRejected(413, "too_many_parts", f"more than {MAX_PARTS} form parts")
    files: list[bytes] = []
    for (_, start), (end, _) in itertools.pairwise(delims):
        line_end = body.find(b"\r\n", start, end)  # the rest of the delimiter line: optional spaces (RFC 2046)
        sep = body.find(b"\r\n\r\n", line_end + 2, end) if line_end >= 0 else -1
        if line_end < 0 or body[start:line_end].strip(b" \t") or sep < 0:
            raise RequestRejected(400, "bad_form", "a multipart part is malformed")
        head = body[line_end + 2 : sep]
        name = _NAME.search(head)
        if name is None or name.group(1) not in (b"file", b"files"):
            continue  # other fields are ignored
        for line in head.lower().split(b"\r\n"):
            if line.startswith(b"content-type:"):
                part_type = line.split(b":", 1)[1].decode("latin-1").strip()
                if media_type(part_type) not in RAW_TYPES:
                    raise RequestRejected(415, "unsupported_type", f"file of type {part_type!r} is not accepted")
        if sep + 4 >= end:
            raise RequestRejected(400, "empty", "the uploaded file is empty")
        files.append(body[sep + 4 : end])  # the one copy of the file
    return files
