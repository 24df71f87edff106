"""The prediction routes as plain ASGI: ``POST /v1/predict`` and ``/v1/predict/batch`` are answered here before
FastAPI sees the request (``gpukit.serve.app`` routes them here; FastAPI keeps every other route and the OpenAPI
page, which still documents these two).

Why not through FastAPI: of the 225-326 µs of CPU an HTTP worker spent per 224 px JPEG request, 145-238 were neither
HTTP parsing nor the work itself but the framework around it (its middleware stack, OpenTelemetry checks, the
dependency solver, the request and response objects, a task per ``gather``); here the request is read straight from
the ASGI scope and the answer written as two ASGI messages (``benchmarks/serve-http-cpu_2026-12-02.md``).

Every check is the same as before, in the same order: API key, open for traffic, the body within its deadline and
the size limit (before admission), admission, content type and form, decode budgets, the deadline on the answer.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from gpukit.serve.core import Core, dumps
from gpukit.serve.metrics import server_timing
from gpukit.serve.request import ClientGone, RequestRejected, images_from_body, read_body

__all__ = ["MAX_BATCH_IMAGES", "ROUTES", "predict"]

MAX_BATCH_IMAGES = 256
ROUTES = {"/v1/predict": False, "/v1/predict/batch": True}  # path → many images
_WANTED = {b"content-length", b"content-type", b"x-api-key", b"authorization"}
_JSON = (b"content-type", b"application/json")
_RETRY = (b"retry-after", b"1")
_CLOSE = (b"connection", b"close")


@dataclass
class _Progress:
    """How far a prediction got: what the response and the counters need to know."""

    t0: float
    deadline: float
    stages: dict[str, float] = field(default_factory=dict)
    body_read: bool = False  # else the connection closes after the answer (a lingering close)
    admitted: bool = False


async def predict(core: Core, scope: dict[str, Any], receive: Any, send: Any, route: str) -> None:
    """One prediction request → its response; every outcome is counted once, by its status (499: client gone)."""
    p = _Progress(time.perf_counter(), time.monotonic() + core.config.timeout_s)
    status, payload = 500, b""
    try:
        payload = await _predict(core, scope, receive, ROUTES[route], p)
        status = 499 if scope.get("gpukit.client_gone") else 200
    except RequestRejected as exc:
        status, payload = exc.status, dumps(exc.to_dict())
    except ClientGone:  # or its body broke HTTP: the protocol answered it 400 (``gpukit.refused``)
        status = int(scope.get("gpukit.refused", 499))
    except asyncio.CancelledError:  # uvicorn's drain deadline passed (the request deadline is shorter: rare)
        if not core.draining:
            status = 499
            raise
        status, payload = 503, dumps({"error": "draining", "detail": "cut by the server's drain deadline"})
    except Exception as exc:  # a fault of the server, never of the input
        status, payload = 500, dumps({"error": "internal", "detail": f"{type(exc).__name__}: {exc}"})
    finally:
        if p.admitted:
            core.leave(status)
    await _respond(core, send, route, status, payload, p)


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The few request headers the route reads (the first of each name), as text."""
    out: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name in _WANTED and name.decode() not in out:
            out[name.decode()] = value.decode("latin-1")
    return out


async def _predict(core: Core, scope: dict[str, Any], receive: Any, many: bool, p: _Progress) -> bytes:
    headers = _headers(scope)
    core.check_key(headers)
    core.check_open()
    body = await _body(core, scope, receive, headers, p)
    p.body_read = True
    core.admit()
    core.enter()
    p.admitted = True
    files = images_from_body(headers.get("content-type", ""), body, many)
    if len(files) > MAX_BATCH_IMAGES:
        raise RequestRejected(413, "too_many_images", f"{len(files)} images; at most {MAX_BATCH_IMAGES}")
    del body
    t1 = time.perf_counter()
    p.stages["read"] = t1 - p.t0
    images = await core.decode_all(files, p.deadline)
    t2, submitted = time.perf_counter(), time.monotonic()  # the batcher's clock, for to_batch
    p.stages["decode"] = t2 - t1
    gone = scope.setdefault("gpukit.on_gone", [])  # run by gpukit's protocol when the client disconnects
    if many:
        outcomes = await asyncio.gather(*(core.infer(im, p.deadline, gone) for im in images))
    else:
        outcomes = [await core.infer(images[0], p.deadline, gone)]
    t3 = time.perf_counter()
    if time.monotonic() > p.deadline:  # answered late (a busy loop): the deadline holds all the same
        raise RequestRejected(504, "timeout", f"not answered within {core.config.timeout_s:g} s")
    p.stages["queue"] = max(o.queue_s for o in outcomes)
    p.stages["prep"] = max(o.prep_s for o in outcomes)  # the model process's decode/resize/staging
    p.stages["infer"] = max(o.infer_s for o in outcomes)
    # the way to the batcher and back (a worker's pipe and the model process's threads; one process: the thread
    # hand-offs): queue + prep + infer are the batcher's own time from its submit to the answer
    transit = max(0.0, (t3 - t2) - p.stages["queue"] - p.stages["prep"] - p.stages["infer"])
    p.stages["to_batch"] = min(transit, max(0.0, max(o.t_submit for o in outcomes) - submitted))
    p.stages["from_batch"] = transit - p.stages["to_batch"]
    rows = [core.encode(o.probs) for o in outcomes]  # Core.infer answered: each has its row
    payload = dumps({"predictions": rows} if many else rows[0])
    p.stages["encode"] = time.perf_counter() - t3
    return payload


async def _body(core: Core, scope: dict[str, Any], receive: Any, headers: dict[str, str], p: _Progress) -> bytes:
    """The body, which must arrive within the request's deadline: a slow sender holds no admission meanwhile. When
    gpukit's protocol has the whole of it already (``gpukit.body_complete``, the common case: a small body comes
    with its headers), reading cannot wait, and no timer is set (``asyncio.timeout`` costs 7.9 µs a request)."""
    read = read_body(receive, headers.get("content-length"), core.config.max_body_bytes)
    if scope.get("gpukit.body_complete"):
        return await read
    try:
        async with asyncio.timeout(max(0.0, p.deadline - time.monotonic())):
            return await read
    except TimeoutError:
        raise RequestRejected(408, "slow_body", f"the body did not arrive within {core.config.timeout_s:g} s") from None


async def _respond(core: Core, send: Any, route: str, status: int, payload: bytes, p: _Progress) -> None:
    total = time.perf_counter() - p.t0
    timing = server_timing(p.stages, total).encode()
    headers = [_JSON, (b"content-length", b"%d" % len(payload)), (b"server-timing", timing)]
    if status in (503, 429):
        headers.append(_RETRY)
    if not p.body_read or status in (408, 413):
        headers.append(_CLOSE)  # the rest of the body is read and discarded, then the connection closes
    core.metrics.observe(route, status, total, p.stages)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
