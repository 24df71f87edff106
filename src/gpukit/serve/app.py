"""The FastAPI app: ``create_app(model)`` for a Python user (one process, the model in it), ``build_app(core)`` for
each HTTP worker of a several-process server. Routes: POST /v1/predict, POST /v1/predict/batch, GET /healthz,
/readyz, /metrics, /docs and the upload page at /.

The two prediction routes are answered by ``gpukit.serve.route`` as plain ASGI before FastAPI's own stack (the app's
``__call__`` looks at the path first); their FastAPI routes stay, for the OpenAPI page, and reach the same code.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request  # this module is imported only when an app is built (the serve extra)
from fastapi.responses import HTMLResponse, Response

from gpukit.serve import route
from gpukit.serve.config import ServeConfig
from gpukit.serve.core import Core, dumps
from gpukit.serve.metrics import Metrics

__all__ = ["build_app", "create_app"]
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

    The model loads (from safetensors) in a background thread when the app starts, then runs every batch size once:
    /readyz says 503 (``loading``, then ``warming``) until it has.
    """
    config = (config or ServeConfig(model=Path(model))).validate()
    config.model = Path(model)
    core = Core(config, Metrics())
    engines: list[Any] = []

    def load() -> None:
        from gpukit.serve.engine import start_engine

        try:
            engine = start_engine(config, core.metrics, on_loaded=lambda runner: setattr(core, "warming", True))
        except Exception as exc:  # readyz and predict report it; healthz stays up so the failure can be seen
            core.load_error = f"{type(exc).__name__}: {exc}"
            core.load_hint = getattr(exc, "hint", None)
            return
        engines.append(engine)
        core.warming = False
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

    app = _App(
        title="gpukit serve",
        version="1",
        lifespan=lifespan,
        description="Image classification with a model trained by `gpukit train`.",
    )
    app.state.core = core
    app.core = core
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
        "/v1/model",
        model_route,
        methods=["GET"],
        summary="The model served: architecture, classes, image size, engine and its accuracy gate",
    )
    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
    return app


class _App(FastAPI):
    """FastAPI, except that the prediction routes go straight to ``gpukit.serve.route``."""

    core: Core

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):  # mounted in another app: the path below the mount
                path = path[len(root) :]
            if path in route.ROUTES:
                await route.predict(self.core, scope, receive, send, path)
                return
        await super().__call__(scope, receive, send)


class _Direct(Response):
    """What the FastAPI prediction routes return: the direct route, run as the response (never reached when the
    app's own ``__call__`` routed the request already; kept so that one path serves both)."""

    def __init__(self, core: Core, path: str) -> None:
        self.core, self.path = core, path
        self.background = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await route.predict(self.core, scope, receive, send, self.path)


async def predict(request: Request) -> Any:
    return _Direct(_core(request), "/v1/predict")


async def predict_batch(request: Request) -> Any:
    return _Direct(_core(request), "/v1/predict/batch")


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
        state = state or ("failed" if core.load_error else ("warming" if core.warming else None))
        state = state or ("starting" if core.workers_up is not None and core.info is not None else "loading")
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
        "engine": info.engine,  # the engine chosen, its gate and, under auto, every candidate's speed
    }
    return Response(dumps(doc), 200, media_type="application/json")


async def page(request: Request) -> Any:
    from gpukit.serve.page import PAGE

    return HTMLResponse(PAGE)
