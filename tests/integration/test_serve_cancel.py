"""A client that goes away while its request waits in the batch queue: a real uvicorn server (gpukit's protocol and
app) on loopback, a model held busy by a gate, two clients that hang up. Their requests leave the queue unrun, are
counted in /metrics (``gpukit_queue_cancelled_total``, and as 499), and the others are answered. Bounded in time."""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httptools")

from serve_harness import metric

from gpukit.serve.app import build_app
from gpukit.serve.batcher import Batcher
from gpukit.serve.config import ServeConfig
from gpukit.serve.core import Core
from gpukit.serve.listen import listen_socket, uvicorn_server
from gpukit.serve.metrics import Metrics
from gpukit.serve.model import ModelInfo


def _png(value: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def _send(port: int, value: int) -> socket.socket:
    body = _png(value)
    head = f"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: {len(body)}\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head.encode() + body)
    return s


def _until(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class _HeldRunner:
    """Records what it prepared and ran, and holds every forward pass until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.prepared: list[int] = []
        self.ran: list[int] = []

    def prepare(self, items: list[np.ndarray | bytes]) -> np.ndarray:
        batch = np.stack(items)  # type: ignore[arg-type]
        self.prepared.extend(int(v) for v in batch[:, 0, 0, 0])
        return batch

    def execute(self, batch: np.ndarray) -> tuple[np.ndarray, list[str | None]]:
        self.ran.extend(int(v) for v in batch[:, 0, 0, 0])
        assert self.gate.wait(20)
        p = batch[:, 0, 0, 0].astype(np.float32) / 255
        return np.stack([1 - p, p], axis=1), [None] * len(batch)


def test_a_client_that_hangs_up_takes_its_queued_request_out_unrun():
    # PNG bodies are decoded on a thread pool, so requests sent together may reach the queue in any order: each step
    # waits for its request to be where it must be (running, prepared, queued) before the next is sent
    runner = _HeldRunner()
    gate, ran = runner.gate, runner.ran

    config = ServeConfig(model=Path("unused"), max_batch=1, max_wait_ms=0, timeout_s=20)
    core = Core(config, Metrics())
    core.info = ModelInfo("seed-cnn", ("a", "b"), 4, "unused")
    batcher = Batcher(runner, 1, 0.0, 64, on_cancel=core.metrics.cancelled.inc)
    batcher.start()
    core.submitter = batcher
    sock = listen_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn_server(build_app(core), config, lambda: setattr(core, "draining", True))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert _until(lambda: server.started)
        clients = {10: _send(port, 10)}
        assert _until(lambda: ran == [10])  # 10 runs (held)
        clients[20] = _send(port, 20)
        assert _until(lambda: runner.prepared == [10, 20] and batcher.depth == 0)  # 20 is prepared, in the hand-off
        clients |= {v: _send(port, v) for v in (30, 40)}
        assert _until(lambda: batcher.depth == 2)  # 30 and 40 wait in the queue: the hand-off is full
        for v in (30, 40):  # hang up hard (RST): the server sees the connection lost at once
            clients[v].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            clients[v].close()
        assert _until(lambda: batcher.stats.cancelled == 2 and batcher.depth == 0)
        gate.set()
        for v in (10, 20):
            answer = clients[v].recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            clients[v].close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert metric(text, "gpukit_queue_cancelled_total") == 2
        assert _until(lambda: core.in_flight == 0)
        assert core.cancelled == 2 and core.answered_ok == 2
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert metric(text, "gpukit_requests_total", 'route="/v1/predict",status="499"') == 2
        assert runner.prepared == ran == [10, 20] and batcher.stats.images == 2  # the cancelled two never ran
    finally:
        gate.set()
        server.should_exit = True
        thread.join(15)
        batcher.stop()
        sock.close()
