"""Reading a request body safely: the size limit checked while reading, the content type on an allow-list, and a
small strict multipart/form-data splitter (images are the only fields we want, so no general form parser is needed).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

__all__ = ["RAW_TYPES", "RequestRejected", "images_from_body", "read_body"]

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


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


async def read_body(chunks: AsyncIterator[bytes], content_length: str | None, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it passes ``limit`` (a declared length over it is refused unread)."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise RequestRejected(400, "bad_length", "Content-Length is not a number") from None
        if declared > limit:
            raise RequestRejected(413, "too_large", f"body of {declared} bytes is over the limit of {limit}")
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:  # checked per chunk: an oversize body is never held whole; the connection then closes
            parts.clear()  # with a lingering close (gpukit.serve.protocol), so the client still reads the 413
            raise RequestRejected(413, "too_large", f"body is over the limit of {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)


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


def _split_multipart(content_type: str, body: bytes) -> list[bytes]:
    m = _BOUNDARY.search(content_type)
    if not m:
        raise RequestRejected(400, "bad_form", "multipart body without a boundary")
    # RFC 2046: a delimiter is CRLF "--" boundary, so a part's content may hold "--boundary" not after a CRLF
    chunks = (b"\r\n" + body).split(b"\r\n--" + m.group(1).encode("latin-1"))
    if len(chunks) < 3 or not chunks[-1].startswith(b"--"):
        raise RequestRejected(400, "bad_form", "multipart body is truncated (no closing boundary)")
    if len(chunks) - 2 > MAX_PARTS:
        raise RequestRejected(413, "too_many_parts", f"more than {MAX_PARTS} form parts")
    files: list[bytes] = []
    for chunk in chunks[1:-1]:
        line_end = chunk.find(b"\r\n")  # the rest of the delimiter line: optional spaces (RFC 2046 padding)
        head, sep, data = chunk[line_end + 2 :].partition(b"\r\n\r\n")
        if line_end < 0 or chunk[:line_end].strip(b" \t") or not sep:
            raise RequestRejected(400, "bad_form", "a multipart part is malformed")
        headers = head.lower()
        name = _NAME.search(head)
        if name is None or name.group(1) not in (b"file", b"files"):
            continue  # other fields are ignored
        for line in headers.split(b"\r\n"):
            if line.startswith(b"content-type:"):
                part_type = line.split(b":", 1)[1].decode("latin-1").strip()
                if media_type(part_type) not in RAW_TYPES:
                    raise RequestRejected(415, "unsupported_type", f"file of type {part_type!r} is not accepted")
        if not data:
            raise RequestRejected(400, "empty", "the uploaded file is empty")
        files.append(data)
    return files
