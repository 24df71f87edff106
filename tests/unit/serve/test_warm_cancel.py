"""Readiness means warm (every batch size the server will use has run once through the model before /readyz is
200), and a request whose client went away leaves the batch queue unrun (in the batcher, and over the pipe)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import threading
import time

import numpy as np
import pytest
from serve_testdata import SIZE, make_checkpoint

from gpukit.serve.batcher import Batcher, Outcome
from gpukit.serve.ipc import PipeClient, PipeHub

pytest.importorskip("torch")


def test_warm_runs_every_padded_size_once_and_cpu_batches_run_unpadded(tmp_path):
    import torch

    from gpukit.serve.model import ModelRunner

    runner = ModelRunner(make_checkpoint(tmp_path / "run"), "cpu", max_batch=40)
    rows: list[int] = []
    runner.net.register_forward_hook(lambda _m, inputs, _o: rows.append(int(inputs[0].shape[0])))
    assert runner.buckets == [1, 2, 4, 8, 16, 32, 40]
    assert runner.warm() == runner.buckets and rows == runner.buckets  # each once, through prepare + execute
    rows.clear()
    images = [np.random.default_rng(i).integers(0, 256, (3, SIZE, SIZE), dtype=np.uint8) for i in range(5)]
    probs, errors = runner.run_items(list(images))
    assert rows == [5] and probs.shape == (5, 2) and errors == [None] * 5  # 5 rows, not padded to 8 on the CPU
    with torch.inference_mode():
        alone = np.stack([runner._forward(torch.from_numpy(im[None]))[0].numpy() for im in images])
    assert probs == pytest.approx(alone, abs=1e-6)


def test_readyz_is_503_warming_until_every_size_has_run(tmp_path, monkeypatch):
    from starlette.testclient import TestClient

    from gpukit.serve import ServeConfig, create_app
    from gpukit.serve.model import ModelRunner

    gate, started = threading.Event(), threading.Event()
    real_warm = ModelRunner.warm

    def slow_warm(self: ModelRunner) -> list[int]:
        started.set()
        assert gate.wait(30)
        return real_warm(self)

    monkeypatch.setattr(ModelRunner, "warm", slow_warm)
    model = make_checkpoint(tmp_path / "run")
    app = create_app(model, ServeConfig(model=model, device="cpu", max_batch=8))
    with TestClient(app) as client:
        assert started.wait(30)
        r = client.get("/readyz")
        assert (r.status_code, r.json()["status"]) == (503, "warming")
        assert client.post("/v1/predict", content=b"x", headers={"content-type": "image/jpeg"}).status_code == 503
        gate.set()
        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert client.get("/readyz").json() == {"status": "ready"}
        assert app.state.core.submitter.runner.warmed == [1, 2, 4, 8]


def test_readyz_is_503_starting_until_every_http_worker_accepts_and_stays_ready_after(tmp_path):
    """A worker of a several-process server (``Core.workers_up``: the server's flag that every worker accepts):
    not ready, and predictions 503 ``starting``, until every worker accepts; after that it stays ready."""
    from starlette.testclient import TestClient

    from gpukit.serve import ServeConfig, create_app

    model = make_checkpoint(tmp_path / "run")
    app = create_app(model, ServeConfig(model=model, device="cpu", max_batch=4))
    all_up = [0]
    with TestClient(app) as client:
        deadline = time.monotonic() + 30
        while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        app.state.core.workers_up = lambda: all_up[0] == 1
        r = client.get("/readyz")
        assert (r.status_code, r.json()["status"]) == (503, "starting")
        r = client.post("/v1/predict", content=b"x", headers={"content-type": "image/jpeg"})
        assert (r.status_code, r.json()["error"]) == (503, "starting")
        all_up[0] = 1
        assert client.get("/readyz").json() == {"status": "ready"}
        all_up[0] = 0  # never in a server (the flag stays 1): ready is kept all the same
        assert client.get("/readyz").status_code == 200


def _slow_model(gate: threading.Event, ran: list[int]):
    def run(batch: np.ndarray) -> np.ndarray:
        ran.extend(int(v) for v in batch[:, 0, 0, 0])
        assert gate.wait(10)
        p = batch[:, 0, 0, 0].astype(np.float32) / 255
        return np.stack([1 - p, p], axis=1)

    return run


def test_the_batcher_drops_a_cancelled_request_that_is_still_queued():
    gate, ran, cancelled = threading.Event(), [], []
    b = Batcher(
        _slow_model(gate, ran), max_batch=1, max_wait_s=0.0, queue_size=16, on_cancel=lambda: cancelled.append(1)
    )
    b.start()
    got: dict[int, Outcome] = {}
    handles = [
        b.submit(np.full((3, 2, 2), v, np.uint8), time.monotonic() + 10, lambda o, v=v: got.update({v: o}))
        for v in (1, 2, 3, 4)
    ]
    deadline = time.monotonic() + 10
    while b.depth > 2 and time.monotonic() < deadline:  # 1 runs (held by the gate), 2 is prepared: 3 and 4 queue
        time.sleep(0.005)
    assert b.cancel(handles[2]) and b.cancel(handles[3])
    assert not b.cancel(handles[0])  # already running: it runs, its caller discards the answer
    gate.set()
    b.stop()
    assert ran == [1, 2] and sorted(got) == [1, 2] and b.stats.cancelled == 2 and len(cancelled) == 2


def test_a_cancel_over_the_pipe_takes_the_request_out_of_the_model_process_queue():
    gate, ran = threading.Event(), []
    worker, model = mp.Pipe(duplex=True)
    b = Batcher(_slow_model(gate, ran), max_batch=1, max_wait_s=0.0, queue_size=16)
    b.start()
    PipeHub(b, (3, 2, 2), conns=[model], until_empty=True)
    client = PipeClient(worker)

    async def main() -> dict[int, Outcome]:
        loop = asyncio.get_running_loop()
        futures, rids = {}, {}
        for v in (1, 2, 3, 4):
            futures[v] = loop.create_future()
            rids[v] = client.submit(np.full((3, 2, 2), v, np.uint8), time.monotonic() + 10, futures[v].set_result)
        deadline = time.monotonic() + 10
        while (len(ran) < 1 or b.depth > 2) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        client.cancel(rids[3])
        client.cancel(rids[4])
        while b.stats.cancelled < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        gate.set()
        return {v: await asyncio.wait_for(futures[v], 10) for v in (1, 2)}

    outcomes = asyncio.run(main())
    b.stop()
    assert ran == [1, 2] and b.stats.cancelled == 2
    assert [o.probs[1] for o in outcomes.values()] == pytest.approx([1 / 255, 2 / 255], abs=1e-6)
    assert client._pending == {}  # nothing left waiting for the cancelled ones
