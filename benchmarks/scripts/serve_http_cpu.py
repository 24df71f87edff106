"""CPU microseconds an HTTP worker of `gpukit serve --workers N --decode nvjpeg` spends per /v1/predict request,
split by stage, with the model's time left out (the model process is an echo that answers every request at once
with fixed probabilities, in a process of its own whose CPU is not counted).

    PYTHONPATH=src python benchmarks/scripts/serve_http_cpu.py --label after --json out.json

Everything runs in this process on one event loop (uvloop when installed, as in a worker): uvicorn's protocol
(gpukit's ``GuardedProtocol`` over httptools) is fed the raw bytes of real requests (a 224 px JPEG of 16.5 KB in a
multipart form, as `gpukit loadtest` sends it) over a fake transport, so the socket syscalls are not counted; the
pipe to the model process is real. CPU is ``time.process_time`` over all requests / requests (this process only).

- ``total``: the whole worker path (HTTP parse, the app, multipart, header check, pipe write and the reply, JSON,
  metrics, the response) for ``--concurrency`` connections, each sending its next request when answered (the
  metrics are written once per loop iteration since 2026-12-05: several requests' at once when they end together).
- ``http``: the same protocol with a bare ASGI app that reads the body and sends a fixed answer (the HTTP floor).
- the stages, each alone on the same inputs: ``multipart`` (form → file bytes), ``check`` (format and header check
  of the JPEG), ``pipe`` (submit to the model process and the reply delivered, round trip), ``json`` (probabilities →
  response JSON, Server-Timing, the metrics observed and written, as if each request ended alone in its iteration);
- ``app_glue``: total − http − the stages (routing, request object, headers, futures, timers, the response object).

``--model seed``: the seed CNN's path instead, `--decode pil` with a 64 px JPEG of 3.3 KB. The worker decodes it on
its loop (``decode``: header, budgets, pixels), ``check`` is the test that sends it there (``inline_decodable``), and
the pipe carries the decoded 12 KB image.

``python_multipart``, measured beside (not part of the total): the same form through python-multipart's parser.
It runs on the code before issue 27's direct route and after it (the same functions, by name).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

CLASSES = tuple(f"class{i}" for i in range(10))
BOUNDARY = "gpukitloadtest0123456789"


def jpeg_64() -> bytes:
    """A 64×64 JPEG of 3.3 KB as `benchmarks/scripts/serve_h200.py` makes the seed CNN's (noise, one strong channel,
    quality 90)."""
    from PIL import Image

    rng = np.random.default_rng(64)
    px = rng.integers(0, 120, (64, 64, 3), dtype=np.uint8)
    px[..., 0] = rng.integers(130, 256, (64, 64), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(px).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def jpeg_224(seed: int = 0) -> bytes:
    """A 224×224 JPEG of 16.5 KB (smooth shapes and texture, quality 90)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:224, 0:224] / 224.0
    img = np.stack([np.sin(6 * x + c) * np.cos(5 * y - c) for c in (0.0, 1.0, 2.0)], axis=-1) * 90 + 128
    img += rng.normal(0, 9, img.shape)
    buf = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def request_bytes(jpeg: bytes) -> tuple[bytes, bytes, str]:
    """(the whole HTTP request, its body, its content type) as `gpukit loadtest` builds them."""
    body = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="cat.jpg"\r\n'
        f"Content-Type: image/jpeg\r\n\r\n".encode()
        + jpeg
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    ctype = f"multipart/form-data; boundary={BOUNDARY}"
    head = (
        f"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nUser-Agent: gpukit-loadtest\r\n"
        f"Accept: */*\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body, body, ctype


# --- the model process: an echo ---------------------------------------------------------------------------------


class _Echo:
    depth = 0

    def __init__(self, probs: np.ndarray) -> None:
        self.probs = probs
        self.after_replies: list[Any] = []  # PipeHub's flush joins it (its replies also leave after each message)

    def submit(self, image: Any, deadline: float, callback: Any) -> None:
        from gpukit.serve.batcher import Outcome

        callback(Outcome(self.probs, 0.0001, 0.0002, 1, None, 0.0001))


def echo_main(conn: Any, probs: np.ndarray, side: int = 224) -> None:
    from gpukit.serve.ipc import PipeHub

    PipeHub(_Echo(probs), (3, side, side), conns=[conn], until_empty=True).thread.join()


# --- a fake transport -------------------------------------------------------------------------------------------


class FakeTransport:
    """What uvicorn's protocol writes to; ``waiter`` is set when a whole response (headers and body) is in."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[bytes] | None = None
        self.closed = False

    def write(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end]).lower()
        i = head.find(b"content-length:")
        length = int(head[i + 15 :].split(b"\r\n", 1)[0]) if i >= 0 else 0
        if len(self.buf) >= end + 4 + length:
            response = bytes(self.buf[: end + 4 + length])
            del self.buf[: end + 4 + length]
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(response)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, *a: Any, **k: Any) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def protocol_factory(app: Any, serve_config: Any) -> Any:
    from uvicorn.server import ServerState

    from gpukit.serve.listen import uvicorn_server

    server = uvicorn_server(app, serve_config, lambda: None)
    cfg = server.config
    cfg.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Tue, 01 Dec 2026 23:00:00 GMT"), *cfg.encoded_headers]
    loop = asyncio.get_running_loop()
    return lambda: cfg.http_protocol_class(config=cfg, server_state=state, app_state={}, _loop=loop)


async def drive(make_protocol: Any, raw: bytes, n: int, concurrency: int) -> tuple[float, bytes]:
    """``n`` requests over ``concurrency`` connections → (CPU seconds per request, the last response)."""
    loop = asyncio.get_running_loop()
    conns = []
    for _ in range(concurrency):
        t = FakeTransport()
        p = make_protocol()
        p.connection_made(t)
        conns.append((p, t))
    last = b""

    async def client(p: Any, t: FakeTransport, count: int) -> None:
        nonlocal last
        for _ in range(count):
            t.waiter = loop.create_future()
            p.data_received(raw)
            last = await t.waiter

    per = n // concurrency
    await asyncio.gather(*(client(p, t, 20) for p, t in conns))  # warm-up
    c0 = time.process_time()
    await asyncio.gather(*(client(p, t, per) for p, t in conns))
    cpu = time.process_time() - c0
    for p, _ in conns:
        p.connection_lost(None)
    return cpu / (per * concurrency), last


async def bare_app(scope: Any, receive: Any, send: Any) -> None:
    """The HTTP floor: read the body, answer a fixed JSON."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        msg = await receive()
        more = msg.get("more_body", False)
    body = b'{"label":"class3","probability":0.5}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def per_call(fn: Any, n: int) -> float:
    for _ in range(min(200, n)):
        fn()
    c0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - c0) / n


# --- the stages, each alone ------------------------------------------------------------------------------------


def stage_costs(core: Any, body: bytes, ctype: str, jpeg: bytes, probs: np.ndarray, n: int) -> dict[str, float]:
    from gpukit.serve.core import _DecodeJob, dumps
    from gpukit.serve.decode import batch_decodable, inline_decodable
    from gpukit.serve.metrics import server_timing
    from gpukit.serve.request import images_from_body

    stages = {"read": 1e-4, "decode": 5e-5, "queue": 1e-4, "prep": 1e-4, "infer": 2e-4, "encode": 2e-5}
    multipart = lambda: images_from_body(ctype, body, False)  # noqa: E731

    def answer() -> None:
        payload = dumps(core.encode(probs))
        server_timing(stages, 0.001)
        core.metrics.observe("/v1/predict", 200, 0.001, stages)
        getattr(core.metrics, "flush", lambda: None)()  # written now: one request per loop iteration, the worst case
        assert payload

    assert multipart() == [jpeg], "the multipart parser returned other bytes"
    assert python_multipart(body, BOUNDARY.encode()) == [jpeg], "python-multipart returned other bytes"
    costs = {
        "python_multipart": per_call(lambda: python_multipart(body, BOUNDARY.encode()), n),
        "multipart": per_call(multipart, n),
        "json": per_call(answer, n),
    }
    if core.config.decode == "pil":  # the seed CNN's path: the worker decodes the JPEG on its loop
        side = core.info.image_size
        assert inline_decodable(jpeg, side, 16_777_216), "the JPEG would not be decoded on the loop"
        costs["check"] = per_call(lambda: inline_decodable(jpeg, side, 16_777_216), n)
        costs["decode"] = per_call(lambda: _DecodeJob(core, time.monotonic() + 10).decode(jpeg), n)
    else:
        costs["check"] = per_call(lambda: batch_decodable(jpeg, 16_777_216), n)
    return costs


def python_multipart(body: bytes, boundary: bytes) -> list[bytes]:
    """The file fields of ``body`` through python-multipart's streaming parser (what Starlette's form parsing uses),
    collected as bytes: the alternative measured beside ours."""
    from python_multipart.multipart import MultipartParser

    files: list[bytes] = []
    part: list[bytes] = []

    def on_part_data(data: bytes, start: int, end: int) -> None:
        part.append(data[start:end])

    def on_part_end() -> None:
        files.append(b"".join(part))
        part.clear()

    parser = MultipartParser(boundary, {"on_part_data": on_part_data, "on_part_end": on_part_end})
    parser.write(body)
    parser.finalize()
    return files


async def pipe_cost(client: Any, jpeg: Any, n: int, concurrency: int) -> float:
    loop = asyncio.get_running_loop()

    async def one(count: int) -> None:
        for _ in range(count):
            fut = loop.create_future()
            client.submit(jpeg, time.monotonic() + 10, fut.set_result)
            outcome = await fut
            assert outcome.error is None

    await asyncio.gather(*(one(20) for _ in range(concurrency)))
    c0 = time.process_time()
    await asyncio.gather(*(one(n // concurrency) for _ in range(concurrency)))
    return (time.process_time() - c0) / (n // concurrency * concurrency)


def _count_flushes(metrics: Any) -> list[int]:
    """Counts the metrics' writes (once per loop iteration that answered requests; none before 2026-12-05's code)."""
    count = [0]
    flush = getattr(metrics, "flush", None)
    if flush is not None:

        def counted() -> None:
            count[0] += 1
            flush()

        metrics.flush = counted  # _due schedules self.flush: the instance's attribute
    return count


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from gpukit.serve.app import build_app
    from gpukit.serve.config import ServeConfig
    from gpukit.serve.core import Core
    from gpukit.serve.decode import decode_bytes
    from gpukit.serve.ipc import PipeClient
    from gpukit.serve.metrics import Metrics
    from gpukit.serve.model import ModelInfo

    seed = args.model == "seed"
    jpeg, side = (jpeg_64(), 64) if seed else (jpeg_224(), 224)
    raw, body, ctype = request_bytes(jpeg)
    probs = np.linspace(0.01, 0.19, len(CLASSES), dtype=np.float32)
    config = ServeConfig(model=Path("unused"), decode="pil" if seed else "nvjpeg", workers=2, queue_size=4096)
    ours, theirs = mp.get_context("spawn").Pipe(duplex=True)
    echo = mp.get_context("spawn").Process(target=echo_main, args=(theirs, probs, side), daemon=True)
    echo.start()
    theirs.close()
    try:
        core = Core(config, Metrics(multiprocess=True))
        core.info = ModelInfo("seed-cnn" if seed else "resnet50", CLASSES, side, "unused")
        client = PipeClient(ours)
        core.submitter = client
        app = build_app(core)
        result: dict[str, Any] = {}
        flushes = _count_flushes(core.metrics)
        for name, target in (("total", app), ("http", bare_app)):
            samples = []
            for _ in range(args.repeats):
                cpu, last = await drive(protocol_factory(target, config), raw, args.requests, args.concurrency)
                samples.append(cpu)
            assert last.startswith(b"HTTP/1.1 200"), last[:200]
            result[name] = samples
            if name == "total":
                result["response"] = last.decode("latin-1")
                answered = args.repeats * (args.requests // args.concurrency + 20) * args.concurrency
                result["requests_per_metrics_write"] = answered / flushes[0] if flushes[0] else None
        payload = decode_bytes(jpeg, side, 16_777_216) if seed else jpeg  # what the worker sends the model process
        pipe = [await pipe_cost(client, payload, args.requests, args.concurrency) for _ in range(args.repeats)]
        alone = [stage_costs(core, body, ctype, jpeg, probs, args.requests) for _ in range(args.repeats)]
        result["pipe"] = pipe
        for key in alone[0]:
            result[key] = [a[key] for a in alone]
        return result
    finally:
        ours.close()
        echo.join(5)
        if echo.is_alive():
            echo.kill()


def summarise(raw: dict[str, Any]) -> dict[str, Any]:
    med = {k: float(np.median(v)) * 1e6 for k, v in raw.items() if isinstance(v, list)}
    spread = {k: [min(v) * 1e6, max(v) * 1e6] for k, v in raw.items() if isinstance(v, list)}
    stages = ("multipart", "check", "decode", "pipe", "json")
    med.setdefault("decode", 0.0)
    med["app_glue"] = med["total"] - med["http"] - sum(med[k] for k in stages)
    return {"us_per_request_median": med, "us_per_request_min_max": spread}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--model", choices=["resnet", "seed"], default="resnet",
                    help="resnet: a 224 px JPEG passed to the model process (--decode nvjpeg); seed: a 64 px JPEG "
                         "decoded by the worker on its loop (--decode pil), the seed CNN's path")  # fmt: skip
    args = ap.parse_args()
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpukit-bench-metrics-"))
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    raw = asyncio.run(measure(args))
    out = {
        "label": args.label,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "requests": args.requests,
        "concurrency": args.concurrency,
        "repeats": args.repeats,
        "model": args.model,
        "jpeg_bytes": len(jpeg_64() if args.model == "seed" else jpeg_224()),
        **summarise(raw),
        "requests_per_metrics_write": raw.get("requests_per_metrics_write"),
        "raw_s": {k: v for k, v in raw.items() if isinstance(v, list)},
        "response": raw["response"],
    }
    med = out["us_per_request_median"]
    for k in ("total", "http", "multipart", "check", "decode", "pipe", "json", "app_glue", "python_multipart"):
        lo, hi = out["us_per_request_min_max"].get(k, [med[k], med[k]])
        print(f"{args.label:>8} {k:>10}: {med[k]:8.1f} µs/request  (min {lo:.1f}, max {hi:.1f})")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
