"""The FastAPI app: ``create_app(model)`` for a Python user (one process, the model in it), ``build_app(core)`` for
each HTTP worker of a several-process server. Routes: POST /v1/predict, POST /v1/predict/batch, GET /healthz,
/readyz, /metrics, /docs and the upload page at /.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request  # this module is imported only when an app is built (the serve extra)
from fastapi.responses import HTMLResponse, Response
from starlette.requests import ClientDisconnect

from gpukit.serve.config import ServeConfig
from gpukit.serve.core import Core, dumps
from gpukit.serve.metrics import Metrics, server_timing
from gpukit.serve.request import RequestRejected, images_from_body, read_body

__all__ = ["build_app", "create_app"]

MAX_BATCH_IMAGES = 256
_FORM = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "properties": {"file": {"type": "string", "format": "binary"}},
            "required": ["file"],
        }
    },
    "image/jpeg": {"schema": {"type": "string", "format": "binary"}},
    "image/png": {"schema": {"type": "string", "format": "binary"}},
}
_BATCH_FORM = {
    "multipart/form-data": {
        "schema": {
            "type": "object",
            "properties": {"files": {"type": "array", "items": {"type": "string", "format": "binary"}}},
        }
    }
}


def create_app(model: Path | str, config: ServeConfig | None = None) -> Any:
    """A FastAPI app serving ``model`` (a run folder or checkpoint) in this process; mount it in your own ASGI app.

    The model loads (from safetensors) in a background thread when the app starts: /readyz says 503 until it has.
    """
    config = (config or ServeConfig(model=Path(model))).validate()
    config.model = Path(model)
    core = Core(config, Metrics())
    engines: list[Any] = []

    def load() -> None:
        from gpukit.serve.engine import start_engine

        try:
            engine = start_engine(config, core.metrics)
        except Exception as exc:  # readyz and predict report it; healthz stays up so the failure can be seen
            core.load_error = f"{type(exc).__name__}: {exc}"
            return
        engines.append(engine)
        core.device, core.warmup_s = engine.runner.device, engine.runner.warmup_s
        core.info, core.submitter = engine.runner.info, engine.batcher

    def stop() -> None:
        for engine in engines:
            engine.stop()
        core.pool.shutdown(wait=False)

    return build_app(core, on_start=lambda: threading.Thread(target=load, daemon=True).start(), on_stop=stop)


def build_app(core: Core, on_start: Callable[[], None] | None = None, on_stop: Callable[[], None] | None = None) -> Any:
    """The routes over ``core``; ``on_start``/``on_stop`` run in the app's lifespan."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if on_start:
            on_start()
        yield
        if on_stop:
            on_stop()

    app = FastAPI(
        title="gpukit serve",
        version="1",
        lifespan=lifespan,
        description="Image classification with a model trained by `gpukit train`.",
    )
    app.state.core = core
    app.add_api_route(
        "/v1/predict",
        predict,
        methods=["POST"],
        openapi_extra={"requestBody": {"content": _FORM, "required": True}},
        summary="Classify one image (multipart field `file`, or the raw bytes)",
    )
    app.add_api_route(
        "/v1/predict/batch",
        predict_batch,
        methods=["POST"],
        openapi_extra={"requestBody": {"content": _BATCH_FORM, "required": True}},
        summary="Classify several images (multipart fields `files`)",
    )
    app.add_api_route("/healthz", healthz, methods=["GET"], summary="Alive (503 once this process can no longer serve)")
    app.add_api_route("/readyz", readyz, methods=["GET"], summary="Ready for traffic (503 while loading or draining)")
    app.add_api_route("/metrics", metrics, methods=["GET"], summary="Prometheus metrics")
    app.add_api_route(
        "/v1/model", model_route, methods=["GET"], summary="The model served: architecture, classes, image size"
    )
    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
    return app


@dataclass
class _Progress:
    """How far a prediction got: what the response and the counters need to know."""

    t0: float
    deadline: float
    stages: dict[str, float] = field(default_factory=dict)
    body_read: bool = False  # else the connection closes after the answer (a lingering close)
    admitted: bool = False


async def predict(request: Request) -> Any:
    return await _answer(request, "/v1/predict", many=False)


async def predict_batch(request: Request) -> Any:
    return await _answer(request, "/v1/predict/batch", many=True)


async def _answer(request: Request, route: str, many: bool) -> Any:
    """One prediction request → its response; every outcome is counted once, by its status (499: client gone)."""
    core: Core = request.app.state.core
    p = _Progress(time.perf_counter(), time.monotonic() + core.config.timeout_s)
    status, payload = 500, b""
    try:
        payload = await _predict(core, request, many, p)
        status = 499 if request.scope.get("gpukit.client_gone") else 200
    except RequestRejected as exc:
        status, payload = exc.status, dumps(exc.to_dict())
    except ClientDisconnect:
        status = 499
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
    return _respond(core, route, status, payload, p)


async def _predict(core: Core, request: Request, many: bool, p: _Progress) -> bytes:
    core.check_key(request.headers)
    core.check_open()
    try:  # the body must arrive within the request's deadline: a slow sender holds no admission meanwhile
        async with asyncio.timeout(max(0.0, p.deadline - time.monotonic())):
            body = await read_body(request.stream(), request.headers.get("content-length"), core.config.max_body_bytes)
    except TimeoutError:
        raise RequestRejected(408, "slow_body", f"the body did not arrive within {core.config.timeout_s:g} s") from None
    p.body_read = True
    core.admit()
    core.enter()
    p.admitted = True
    files = images_from_body(request.headers.get("content-type", ""), body, many)
    if len(files) > MAX_BATCH_IMAGES:
        raise RequestRejected(413, "too_many_images", f"{len(files)} images; at most {MAX_BATCH_IMAGES}")
    del body
    t1 = time.perf_counter()
    p.stages["read"] = t1 - p.t0
    images = await core.decode_all(files, p.deadline)
    t2 = time.perf_counter()
    p.stages["decode"] = t2 - t1
    outcomes = await asyncio.gather(*(core.infer(im, p.deadline) for im in images))
    t3 = time.perf_counter()
    if time.monotonic() > p.deadline:  # answered late (a busy loop): the deadline holds all the same
        raise RequestRejected(504, "timeout", f"not answered within {core.config.timeout_s:g} s")
    p.stages["queue"] = max(o.queue_s for o in outcomes)
    p.stages["prep"] = max(o.prep_s for o in outcomes)  # the model process's decode/resize/staging
    rest = (t3 - t2) - p.stages["queue"] - p.stages["prep"]
    p.stages["infer"] = max(0.0, rest) if many else outcomes[0].infer_s
    rows = [core.encode(o.probs or []) for o in outcomes]
    payload = dumps({"predictions": rows} if many else rows[0])
    p.stages["encode"] = time.perf_counter() - t3
    return payload


def _respond(core: Core, route: str, status: int, payload: bytes, p: _Progress) -> Any:
    total = time.perf_counter() - p.t0
    headers = {"Server-Timing": server_timing(p.stages, total)}
    if status in (503, 429):
        headers["Retry-After"] = "1"
    if not p.body_read or status in (408, 413):
        headers["Connection"] = "close"  # the rest of the body is read and discarded, then the connection closes
    core.metrics.observe(route, status, total, p.stages)
    return Response(payload, status, headers, media_type="application/json")


def _core(request: Request) -> Core:
    return request.app.state.core  # type: ignore[no-any-return]


async def healthz(request: Request) -> Any:
    core = _core(request)
    if core.model_gone:  # this process can never serve again (it is exiting): a liveness probe must see it
        core.metrics.observe("/healthz", 503, 0.0)
        return Response(b'{"status":"model_gone"}', 503, media_type="application/json")
    core.metrics.observe("/healthz", 200, 0.0)
    return Response(b'{"status":"alive"}', 200, media_type="application/json")


async def readyz(request: Request) -> Any:
    core = _core(request)
    body: dict[str, str | None]
    if core.ready:
        status, body = 200, {"status": "ready"}
    else:
        state = "draining" if core.draining else ("model_gone" if core.model_gone else None)
        state = state or ("failed" if core.load_error else "loading")
        status, body = 503, {"status": state, "detail": core.load_error}
    core.metrics.observe("/readyz", status, 0.0)
    return Response(dumps(body), status, media_type="application/json")


async def metrics(request: Request) -> Any:
    core = _core(request)
    if core.submitter is not None and not core.metrics.multiprocess:  # else the model process sets it
        core.metrics.queue_depth.set(core.submitter.depth)
    payload, content_type = core.metrics.exposition()
    return Response(payload, 200, media_type=content_type)


async def model_route(request: Request) -> Any:
    info = _core(request).info
    if info is None:
        return Response(dumps({"error": "loading"}), 503, media_type="application/json")
    doc = {
        "model": info.model,
        "classes": list(info.classes),
        "image_size": info.image_size,
        "api_key": _core(request).api_key is not None,
    }
    return Response(dumps(doc), 200, media_type="application/json")


async def page(request: Request) -> Any:
    from gpukit.serve.page import PAGE

    return HTMLResponse(PAGE)
