"""The pipe between an HTTP worker and the model process: a real ``Batcher`` behind ``PipeHub`` on one end, the
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
from gpukit.serve.ipc import PipeClient, PipeHub

SHAPE = (3, 4, 4)


def _model(batch: np.ndarray) -> np.ndarray:
    p = batch[:, 0, 0, 0].astype(np.float32) / 255
    return np.stack([1 - p, p], axis=1)


def _ends() -> tuple[PipeClient, Batcher, Connection]:
    worker, model = mp.Pipe(duplex=True)
    batcher = Batcher(_model, max_batch=4, max_wait_s=0.01, queue_size=64)
    batcher.start()
    PipeHub(batcher, SHAPE, conns=[model], until_empty=True)
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


def test_an_event_loop_reads_replies_larger_than_the_pipe_holds_each_to_its_request():
    """64 replies of 20,000 classes (5 MB in one message, far past a socket's buffer): the loop reads them a part at
    a time into its reused buffer (``_Frames``) and each row still reaches its own request."""
    classes = 20_000

    def wide(batch: np.ndarray) -> np.ndarray:
        rows = np.tile(np.arange(classes, dtype=np.float32), (len(batch), 1))
        rows[:, 0] = batch[:, 0, 0, 0]  # which request the row answers
        return rows

    worker, model = mp.Pipe(duplex=True)
    batcher = Batcher(wide, max_batch=64, max_wait_s=0.2, queue_size=256)
    batcher.start()
    PipeHub(batcher, SHAPE, conns=[model], until_empty=True)
    client = PipeClient(worker)

    async def main() -> list[Outcome]:
        loop = asyncio.get_running_loop()
        futures = []
        for v in range(64):
            fut: asyncio.Future[Outcome] = loop.create_future()
            client.submit(np.full(SHAPE, v, np.uint8), time.monotonic() + 30, fut.set_result)
            futures.append(fut)
        return list(await asyncio.wait_for(asyncio.gather(*futures), 30))

    outcomes = asyncio.run(main())
    batcher.stop()
    assert [int(o.probs[0]) for o in outcomes] == list(range(64))
    assert all(o.probs.shape == (classes,) and o.probs[-1] == classes - 1 for o in outcomes)
    assert max(o.batch_size for o in outcomes) > 1
    assert len(client._frames.buf) > 1 << 20  # grown past its 64 KiB to hold the largest message


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


def test_one_hub_thread_reads_every_pipe_added_at_any_time_and_drops_the_ones_that_close():
    """``PipeHub``: pipes added before and while its one thread waits are all read, each worker gets its own
    answers, a worker that exits is unregistered (its flush leaves the batcher) while the others go on."""
    batcher = Batcher(_model, max_batch=4, max_wait_s=0.01, queue_size=64)
    batcher.start()
    hub = PipeHub(batcher, SHAPE)
    clients, ends = [], []
    for _ in range(3):
        worker, model = mp.Pipe(duplex=True)
        hub.add(model)
        clients.append(PipeClient(worker))
        ends.append(worker)
        time.sleep(0.05)  # the later ones arrive while the thread waits in select

    def ask(client: PipeClient, values: list[int]) -> list[float]:
        got: dict[int, float] = {}
        done = threading.Event()

        def answer(v: int):
            def cb(o: Outcome) -> None:
                got[v] = o.probs[1]
                if len(got) == len(values):
                    done.set()

            return cb

        for v in values:
            client.submit(np.full(SHAPE, v, np.uint8), time.monotonic() + 10, answer(v))
        assert done.wait(10)
        return [got[v] for v in values]

    for i, client in enumerate(clients):
        values = [10 * i + k for k in range(1, 8)]
        assert ask(client, values) == pytest.approx([v / 255 for v in values], abs=1e-6)
    assert len(batcher.after_replies) == 3 and len(hub._sel.get_map()) == 4  # three pipes and the wake-up pipe
    # the first worker exits (shut down: a close alone would not end its own reader thread's blocked read)
    socket.socket(fileno=os.dup(ends[0].fileno())).shutdown(socket.SHUT_RDWR)
    deadline = time.monotonic() + 10
    # the hub unregisters the pipe, then closes it (which takes its flush out of after_replies): wait for both
    while (len(hub._sel.get_map()) > 3 or len(batcher.after_replies) > 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(hub._sel.get_map()) == 3 and len(batcher.after_replies) == 2
    assert ask(clients[2], [200, 201]) == pytest.approx([200 / 255, 201 / 255], abs=1e-6)
    assert hub.thread.is_alive()  # it runs on with no pipe at all, for the workers to come
    batcher.stop()


def test_a_pipe_whose_message_breaks_the_hub_is_closed_alone():
    """A message the model side cannot parse (a record header cut short) closes that worker's pipe only: the hub's
    thread and the other workers go on."""
    batcher = Batcher(_model, max_batch=4, max_wait_s=0.01, queue_size=64)
    batcher.start()
    bad_worker, bad_model = mp.Pipe(duplex=True)
    good_worker, good_model = mp.Pipe(duplex=True)
    hub = PipeHub(batcher, SHAPE, conns=[bad_model, good_model])
    bad_worker.send_bytes(b"\x05\x00")  # two bytes of a 21-byte record header
    assert bad_worker.poll(10)
    with pytest.raises(EOFError):
        bad_worker.recv_bytes()  # its end was closed
    client, got, done = PipeClient(good_worker), [], threading.Event()
    client.submit(np.full(SHAPE, 77, np.uint8), time.monotonic() + 10, lambda o: (got.append(o), done.set()))
    assert done.wait(10) and got[0].probs[1] == pytest.approx(77 / 255, abs=1e-6)
    assert hub.thread.is_alive() and len(batcher.after_replies) == 1
    batcher.stop()


def test_a_hub_until_empty_ends_its_thread_when_its_last_pipe_closes():
    batcher = Batcher(_model, max_batch=4, max_wait_s=0.01, queue_size=64)
    worker, model = mp.Pipe(duplex=True)
    hub = PipeHub(batcher, SHAPE, conns=[model], until_empty=True)
    assert hub.thread.is_alive()
    worker.close()
    hub.thread.join(10)
    assert not hub.thread.is_alive() and batcher.after_replies == []


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


def _raw_records(msg: bytes, head) -> list[tuple]:
    from gpukit.serve.ipc import _records

    return list(_records(msg, head))


def test_the_requests_of_one_loop_iteration_leave_in_one_write():
    """A worker's event loop queues what it submits in one iteration and writes it at the iteration's end: one pipe
    message with every record in order (pixels, JPEG bytes, a cancel), not one message per request."""
    from gpukit.serve.ipc import _REQ

    worker, model = mp.Pipe(duplex=True)
    client = PipeClient(worker)
    jpeg = b"\xff\xd8" + bytes(range(256)) * 40  # 10 kB of payload, not decoded here

    async def main() -> None:
        for v in range(5):
            client.submit(np.full(SHAPE, v, np.uint8), 123.5, lambda o: None)
        rid = client.submit(jpeg, 124.0, lambda o: None)
        client.cancel(rid)
        await asyncio.sleep(0.05)  # the next iterations: the write has happened
        for v in (7, 8):
            client.submit(np.full(SHAPE, v, np.uint8), 125.0, lambda o: None)
        await asyncio.sleep(0.05)

    asyncio.run(main())
    first, second = model.recv_bytes(), model.recv_bytes()
    assert not model.poll(0.1)  # two iterations, two messages
    records = _raw_records(first, _REQ)
    assert [(rid, kind) for (rid, _, kind), _ in records] == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 1), (6, 3)]
    assert [payload[0] for (_, _, kind), payload in records if kind == 0] == [0, 1, 2, 3, 4]
    assert records[5][1] == jpeg and records[5][0][1] == 124.0 and records[6][1] == b""
    assert [payload[0] for _, payload in _raw_records(second, _REQ)] == [7, 8]
    worker.close()
    model.close()


def test_the_replies_of_one_batch_for_a_worker_arrive_in_one_write():
    """Four requests in one batch: the model side answers them in one message (``Batcher.after_replies``), each
    record with its own id, status and probabilities; a request of the wrong size is answered on its own."""
    from gpukit.serve.ipc import _ERROR, _OK, _REP, _REQ

    worker, model = mp.Pipe(duplex=True)
    batcher = Batcher(_model, max_batch=4, max_wait_s=0.5, queue_size=64)
    PipeHub(batcher, SHAPE, conns=[model], until_empty=True)
    deadline = time.monotonic() + 30
    pixels = [np.full(SHAPE, v, np.uint8).tobytes() for v in (10, 20, 30, 40)]
    sent = time.monotonic()
    worker.send_bytes(b"".join(_REQ.pack(len(p), 100 + i, deadline, 0) + p for i, p in enumerate(pixels)))
    assert worker.poll(0) is False
    time.sleep(0.2)  # all four in the queue before the batcher runs: one batch
    started = time.monotonic()
    batcher.start()
    assert worker.poll(10)
    records = _raw_records(worker.recv_bytes(), _REP)
    assert [(f[0], f[1], f[6]) for f, _ in records] == [(100 + i, _OK, 4) for i in range(4)]  # id, status, batch
    # when the batcher queued each (the model side's clock is the worker's): after the write, before the batch ran
    assert all(sent < f[5] < started for f, _ in records)
    probs = [np.frombuffer(tail, np.float32) for _, tail in records]
    assert [p[1] for p in probs] == pytest.approx([10 / 255, 20 / 255, 30 / 255, 40 / 255], abs=1e-6)
    worker.send_bytes(_REQ.pack(3, 200, deadline, 0) + b"abc")
    assert worker.poll(10)
    ((fields, tail),) = _raw_records(worker.recv_bytes(), _REP)
    assert (fields[0], fields[1], tail) == (200, _ERROR, b"image of the wrong size")
    worker.close()
    batcher.stop()


def test_the_model_side_reads_whole_messages_of_any_size_from_its_reused_buffer():
    """``_Frames`` reads what has arrived into one buffer and cuts it into the messages ``send_bytes`` wrote: empty
    ones, ones that straddle the buffer's end (moved to its front) and ones larger than it (it grows), in order, and
    ``EOFError`` once the writer has closed; a worker's requests still reach the batcher through it."""
    import random

    from gpukit.serve.ipc import _Frames

    writer, reader = mp.Pipe(duplex=True)
    rng = random.Random(7)
    sizes = [0, 1, 3, 4, 5, 11, 4096, 4097, 10_000, 70_000, 300_000] * 6
    rng.shuffle(sizes)
    messages = [rng.randbytes(n) for n in sizes]

    def write() -> None:
        for m in messages:
            writer.send_bytes(m)
        writer.close()

    thread = threading.Thread(target=write)
    thread.start()
    frames = _Frames(reader.fileno(), size=4096)
    got = []
    with pytest.raises(EOFError):
        while True:
            frames.read()
            while (view := frames.frame()) is not None:
                got.append(bytes(view))
    thread.join()
    assert got == messages
    assert len(frames.buf) >= 300_000 + 4  # grown to the largest message and its length field
    reader.close()
