"""The dynamic batcher: batches fill to max_batch or flush after max_wait, the queue bound raises at once, requests
past their deadline are dropped without model time, and a failing model fails only its batch."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gpukit.serve.batcher import Batcher, Outcome, QueueFull


class Recorder:
    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.sizes: list[int] = []
        self.delay_s = delay_s
        self.fail = fail
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.gate.wait(10)
        self.sizes.append(len(batch))
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("model exploded")
        # probabilities that identify each image: p = pixel value / 255
        p = batch[:, 0, 0, 0].astype(np.float32) / 255
        return np.stack([1 - p, p], axis=1)


def _collect(n: int) -> tuple[list[Outcome | None], threading.Event, list]:
    out: list[Outcome | None] = [None] * n
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def make(i: int):
        def cb(o: Outcome) -> None:
            out[i] = o
            with lock:
                count[0] += 1
                if count[0] == n:
                    done.set()

        return cb

    return out, done, [make(i) for i in range(n)]


def _img(v: int) -> np.ndarray:
    return np.full((3, 4, 4), v, np.uint8)


def test_fills_to_max_batch_and_keeps_each_result_with_its_request():
    model = Recorder()
    model.gate.clear()  # hold the first batch so the rest queue up
    b = Batcher(model, max_batch=4, max_wait_s=0.05, queue_size=100)
    b.start()
    out, done, cbs = _collect(9)
    far = time.monotonic() + 30
    for i in range(9):
        b.submit(_img(10 * i), far, cbs[i])
    model.gate.set()
    assert done.wait(10)
    b.stop()
    assert sum(model.sizes) == 9 and max(model.sizes) == 4 and model.sizes[-1] == 9 - sum(model.sizes[:-1])
    for i, o in enumerate(out):
        assert o is not None and o.error is None
        assert o.probs[1] == pytest.approx(10 * i / 255, abs=1e-6)  # each request got its own row
        assert o.queue_s >= 0 and o.infer_s >= 0 and 1 <= o.batch_size <= 4
    assert b.stats.images == 9 and b.stats.batches == len(model.sizes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_answer_is_a_float32_row_of_its_batch_whatever_the_runner_returns(dtype):
    """Rows go to the pipe as bytes (``Outcome``): float32 whatever the runner's dtype, each row its own request's,
    and none overwritten by the next batch (a runner that reuses one output buffer)."""
    buf = np.zeros((4, 3), dtype)

    def reusing(batch: np.ndarray) -> np.ndarray:
        buf[: len(batch)] = batch[:, 0, 0, :3]
        return buf[: len(batch)]

    b = Batcher(reusing, max_batch=4, max_wait_s=0.0, queue_size=100)
    b.start()
    out, done, cbs = _collect(8)
    far = time.monotonic() + 30
    for i in range(8):
        b.submit(np.full((3, 4, 4), i, np.uint8), far, cbs[i])
    assert done.wait(10)
    b.stop()
    for i, o in enumerate(out):
        assert o is not None and o.probs is not None
        assert o.probs.dtype == np.float32 and o.probs.tobytes() == np.full(3, i, np.float32).tobytes()


def test_align_takes_whole_passes_when_more_are_waiting_and_the_rest_next():
    model = Recorder()
    model.gate.clear()  # hold the first batch so the rest queue up
    b = Batcher(model, max_batch=8, max_wait_s=0.05, queue_size=100, align=4)
    out, done, cbs = _collect(15)
    far = time.monotonic() + 30
    for i in range(15):  # all queued before the batcher starts: 15 waiting
        b.submit(_img(10 + i), far, cbs[i])
    b.start()
    model.gate.set()
    assert done.wait(10)
    b.stop()
    # 15 waiting → 8 (max), 7 waiting → 4 (a multiple of 4, the rest first in line), then 3 (fewer than 4: all)
    assert model.sizes == [8, 4, 3]
    assert [o.probs[1] for o in out] == pytest.approx([(10 + i) / 255 for i in range(15)], abs=1e-6)
    assert [o.batch_size for o in out] == [8] * 8 + [4] * 4 + [3] * 3  # first in, first served


def test_a_lone_request_waits_at_most_max_wait():
    model = Recorder()
    b = Batcher(model, max_batch=64, max_wait_s=0.08, queue_size=10)
    b.start()
    out, done, cbs = _collect(1)
    t0 = time.monotonic()
    b.submit(_img(1), t0 + 10, cbs[0])
    assert done.wait(5)
    waited = time.monotonic() - t0
    b.stop()
    assert model.sizes == [1]
    assert 0.07 <= waited < 1.0
    assert out[0].queue_s == pytest.approx(waited, abs=0.05)


def test_queue_bound_raises_and_memory_is_bounded():
    model = Recorder()
    model.gate.clear()
    b = Batcher(model, max_batch=2, max_wait_s=0.0, queue_size=3)
    b.start()
    _, done, cbs = _collect(7)
    far = time.monotonic() + 30
    b.submit(_img(0), far, cbs[0])
    b.submit(_img(0), far, cbs[1])
    time.sleep(0.1)  # the first two are taken as a batch, held at the gate
    b.submit(_img(0), far, cbs[2])
    b.submit(_img(0), far, cbs[3])
    time.sleep(0.1)  # these two are prepared while the first batch runs, and wait in the one-batch hand-off
    assert b.depth == 0
    for i in range(4, 7):
        b.submit(_img(0), far, cbs[i])
    time.sleep(0.1)  # the preparing thread takes nothing more until the executor takes the hand-off
    assert b.depth == 3
    with pytest.raises(QueueFull):
        b.submit(_img(0), far, cbs[0])
    model.gate.set()
    assert done.wait(10)
    b.stop()


def test_requests_past_their_deadline_are_dropped_unrun():
    model = Recorder(delay_s=0.2)
    b = Batcher(model, max_batch=1, max_wait_s=0.0, queue_size=10)
    b.start()
    out, done, cbs = _collect(3)
    now = time.monotonic()
    order: list[tuple[int, str]] = []

    def noted(i: int):
        def cb(o: Outcome) -> None:
            order.append((i, threading.current_thread().name))
            cbs[i](o)

        return cb

    b.submit(_img(1), now + 10, noted(0))  # runs for 0.2 s
    b.submit(_img(2), now + 0.05, noted(1))  # expires while the first runs
    b.submit(_img(3), now + 10, noted(2))
    assert done.wait(10)
    b.stop()
    assert out[1].error == "timeout" and out[1].probs is None
    assert out[0].error is None and out[2].error is None
    assert model.sizes == [1, 1] and b.stats.expired == 1
    # the timeout is answered after the batch before it, and like every answer on the replying thread
    assert order == [(0, "gpukit-batcher-reply"), (1, "gpukit-batcher-reply"), (2, "gpukit-batcher-reply")]


def test_a_failing_model_fails_its_batch_and_the_loop_goes_on():
    model = Recorder(fail=True)
    b = Batcher(model, max_batch=8, max_wait_s=0.0, queue_size=10)
    b.start()
    out, done, cbs = _collect(1)
    b.submit(_img(1), time.monotonic() + 10, cbs[0])
    assert done.wait(5)
    assert out[0].error == "RuntimeError: model exploded"
    model.fail = False
    out2, done2, cbs2 = _collect(1)
    b.submit(_img(51), time.monotonic() + 10, cbs2[0])
    assert done2.wait(5)
    b.stop()
    assert out2[0].probs[1] == pytest.approx(0.2, abs=1e-6)
