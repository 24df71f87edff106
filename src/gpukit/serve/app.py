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
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request  # this module is imported only when an app is built (the serve extra)
from fastapi.responses import HTMLResponse, Response

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
    from gpukit.serve.batcher import Batcher
    from gpukit.serve.decode import warm_decoder
    from gpukit.serve.model import ModelRunner

    config = (config or ServeConfig(model=Path(model))).validate()
    config.model = Path(model)
    core = Core(config, Metrics())

    def load() -> None:
        try:
            runner = ModelRunner(config.model, config.device, config.max_batch, config.amp, config.cuda_graphs)
            warm_decoder(runner.info.image_size)
            if config.decode == "nvjpeg":
                runner.warm_batch_decoder()

            def on_batch(size: int, seconds: float) -> None:
                core.metrics.observe_batch(size, runner.gpu_memory_bytes(), batcher.depth)

            batcher = Batcher(
                runner, config.max_batch, config.max_wait_s, config.queue_size, on_batch, align=runner.pass_rows
            )
            batcher.start()
            core.runner = runner  # type: ignore[attr-defined]
            core.info, core.submitter = runner.info, batcher
        except Exception as exc:  # readyz and predict report it; healthz stays up so the failure can be seen
            core.load_error = f"{type(exc).__name__}: {exc}"

    def stop() -> None:
        batcher = core.submitter
        if batcher is not None and hasattr(batcher, "stop"):
            batcher.stop()
        core.pool.shutdown(wait=False)

    return build_app(core, on_start=lambda: threading.Thread(target=load, daemon=True).start(), on_stop=stop)


def build_app(core: Core, on_start: Callable[[], None] | None = None, on_stop: Callable[[], None] | None = None) -> Any:
    from gpukit.serve.page import PAGE

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
    limit = core.config.max_body_bytes

    def respond(route: str, status: int, payload: bytes, t0: float, stages: dict[str, float]) -> Any:
        total = time.perf_counter() - t0
        headers = {"Server-Timing": server_timing(stages, total)}
        if status in (503, 429):
            headers["Retry-After"] = "1"
        if status == 413:
            headers["Connection"] = "close"  # the rest of an oversize body is never read
        core.metrics.observe(route, status, total, stages)
        return Response(payload, status, headers, media_type="application/json")

    async def handle(request: Request, route: str, many: bool) -> Any:
        t0 = time.perf_counter()
        deadline = time.monotonic() + core.config.timeout_s
        stages: dict[str, float] = {}
        admitted = False
        try:
            core.check_key(request.headers)
            core.admit()
            admitted = True
            core.admitted += 1
            core.in_flight += 1
            core.metrics.in_flight.inc()
            body = await read_body(request.stream(), request.headers.get("content-length"), limit)
            files = images_from_body(request.headers.get("content-type", ""), body, many)
            if len(files) > MAX_BATCH_IMAGES:
                raise RequestRejected(413, "too_many_images", f"{len(files)} images; at most {MAX_BATCH_IMAGES}")
            del body
            t1 = time.perf_counter()
            stages["read"] = t1 - t0
            images = await asyncio.gather(*(core.decode(f) for f in files)) if many else [await core.decode(files[0])]
            t2 = time.perf_counter()
            stages["decode"] = t2 - t1
            outcomes = await asyncio.gather(*(core.infer(im, deadline) for im in images))
            t3 = time.perf_counter()
            stages["queue"] = max(o.queue_s for o in outcomes)
            stages["prep"] = max(o.prep_s for o in outcomes)  # the model process's decode/resize/staging
            rest = (t3 - t2) - stages["queue"] - stages["prep"]
            stages["infer"] = max(0.0, rest) if many else outcomes[0].infer_s
            rows = [core.encode(o.probs or []) for o in outcomes]
            payload = dumps({"predictions": rows} if many else rows[0])
            stages["encode"] = time.perf_counter() - t3
            status = 200
        except RequestRejected as exc:
            status, payload = exc.status, dumps(exc.to_dict())
        except BaseException as exc:  # a fault of the server (or a cancel), never of the input
            if not isinstance(exc, Exception):
                status = 499
                raise
            status, payload = 500, dumps({"error": "internal", "detail": f"{type(exc).__name__}: {exc}"})
        finally:
            if admitted:
                core.answered += status != 499  # 499: the client went away (or the task was cancelled)
                core.cancelled += status == 499
                core.answered_ok += status == 200
                core.in_flight -= 1
                core.metrics.in_flight.dec()
        return respond(route, status, payload, t0, stages)

    @app.post(
        "/v1/predict",
        openapi_extra={"requestBody": {"content": _FORM, "required": True}},
        summary="Classify one image (multipart field `file`, or the raw bytes)",
    )
    async def predict(request: Request) -> Any:
        return await handle(request, "/v1/predict", many=False)

    @app.post(
        "/v1/predict/batch",
        openapi_extra={"requestBody": {"content": _BATCH_FORM, "required": True}},
        summary="Classify several images (multipart fields `files`)",
    )
    async def predict_batch(request: Request) -> Any:
        return await handle(request, "/v1/predict/batch", many=True)

    @app.get("/healthz", summary="Alive")
    async def healthz() -> Any:
        core.metrics.observe("/healthz", 200, 0.0)
        return Response(b'{"status":"alive"}', 200, media_type="application/json")

    @app.get("/readyz", summary="Ready for traffic (503 while loading or draining)")
    async def readyz() -> Any:
        body: dict[str, str | None]
        if core.ready:
            status, body = 200, {"status": "ready"}
        else:
            state = "draining" if core.draining else ("failed" if core.load_error else "loading")
            status, body = 503, {"status": state, "detail": core.load_error}
        core.metrics.observe("/readyz", status, 0.0)
        return Response(dumps(body), status, media_type="application/json")

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Any:
        if core.submitter is not None and not core.metrics.multiprocess:  # else the model process sets it
            core.metrics.queue_depth.set(core.submitter.depth)
        payload, content_type = core.metrics.exposition()
        return Response(payload, 200, media_type=content_type)

    @app.get("/v1/model", summary="The model served: architecture, classes, image size")
    async def model() -> Any:
        info = core.info
        if info is None:
            return Response(dumps({"error": "loading"}), 503, media_type="application/json")
        return Response(
            dumps(
                {
                    "model": info.model,
                    "classes": list(info.classes),
                    "image_size": info.image_size,
                    "api_key": core.api_key is not None,
                }
            ),
            200,
            media_type="application/json",
        )

    @app.get("/", include_in_schema=False)
    async def page() -> Any:
        return HTMLResponse(PAGE)

    return app
