"""The pipe between an HTTP worker and the model process: a real ``Batcher`` behind ``serve_pipe`` on one end, the
worker's ``PipeClient`` on the other, read by an event loop (as in a worker) or by its own thread (called from plain
threads); each reply reaches its own request, and when the model side goes away every waiting request fails at once."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import socket
import threading
import time
from multiprocessing.connection import Connection

import numpy as np
import pytest

from gpukit.serve.batcher import Batcher, Outcome
from gpukit.serve.ipc import PipeClient, serve_pipe

SHAPE = (3, 4, 4)


def _model(batch: np.ndarray) -> np.ndarray:
    p = batch[:, 0, 0, 0].astype(np.float32) / 255
    return np.stack([1 - p, p], axis=1)


def _ends() -> tuple[PipeClient, Batcher, Connection]:
    worker, model = mp.Pipe(duplex=True)
    batcher = Batcher(_model, max_batch=4, max_wait_s=0.01, queue_size=64)
    batcher.start()
    serve_pipe(model, batcher, SHAPE)
    return PipeClient(worker), batcher, model


def test_an_event_loop_reads_the_replies_and_each_reaches_its_request():
    client, batcher, _ = _ends()

    async def main() -> list[Outcome]:
        loop = asyncio.get_running_loop()
        futures = []
        for v in range(10, 30):
            fut: asyncio.Future[Outcome] = loop.create_future()
            client.submit(np.full(SHAPE, v, np.uint8), time.monotonic() + 10, fut.set_result)  # called on the loop
            futures.append(fut)
        return list(await asyncio.wait_for(asyncio.gather(*futures), 10))

    outcomes = asyncio.run(main())
    batcher.stop()
    assert isinstance(client._reading, asyncio.AbstractEventLoop)  # no reader thread
    assert [o.probs[1] for o in outcomes] == pytest.approx([v / 255 for v in range(10, 30)], abs=1e-6)
    assert all(o.error is None and 1 <= o.batch_size <= 4 for o in outcomes)


def test_plain_threads_get_a_reader_thread_and_a_closed_model_side_fails_what_waits():
    client, batcher, model = _ends()
    got: list[Outcome] = []
    done = threading.Event()

    def cb(o: Outcome) -> None:
        got.append(o)
        done.set()

    client.submit(np.full(SHAPE, 51, np.uint8), time.monotonic() + 10, cb)
    assert done.wait(10) and got[0].probs[1] == pytest.approx(51 / 255, abs=1e-6)
    assert isinstance(client._reading, threading.Thread)
    batcher.stop()
    waiting = threading.Event()
    failed: list[Outcome] = []

    def never_answered(o: Outcome) -> None:  # a request the model side never answers
        failed.append(o)
        waiting.set()

    client._pending[999] = never_answered
    # the model process went away: its end shut down (a close alone would not wake its pipe thread's blocked read)
    socket.socket(fileno=os.dup(model.fileno())).shutdown(socket.SHUT_RDWR)
    assert waiting.wait(10) and failed[0].error == "the model process exited"
    assert client.closed


def test_a_worker_that_never_used_its_pipe_sees_the_model_process_go_and_answers_503():
    """``watch`` reads the pipe from the start: the model side's exit is seen with no request sent, the callback
    runs on the loop, and a request after it is a 503 ``model_gone``, never a 500 ``BrokenPipeError``."""
    from gpukit.serve.config import ServeConfig
    from gpukit.serve.core import Core
    from gpukit.serve.metrics import Metrics
    from gpukit.serve.model import ModelInfo
    from gpukit.serve.request import RequestRejected

    worker, model = mp.Pipe(duplex=True)
    client = PipeClient(worker)
    core = Core(ServeConfig(model="m"), Metrics())  # type: ignore[arg-type]
    core.info, core.submitter = ModelInfo("m", ("a", "b"), 4, "m"), client

    async def main() -> tuple[bool, int, str]:
        gone = asyncio.Event()
        client.watch(gone.set)
        assert core.ready
        model.close()  # the model process dies
        await asyncio.wait_for(gone.wait(), 5)
        try:
            await core.infer(np.zeros(SHAPE, np.uint8), time.monotonic() + 5)
        except RequestRejected as exc:
            return core.ready, exc.status, exc.code
        raise AssertionError("answered")

    assert asyncio.run(main()) == (False, 503, "model_gone")
    core.pool.shutdown()
