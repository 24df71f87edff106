"""The model process's two-stage pipeline: batch N+1 is prepared while batch N runs, batches and callbacks keep
their order, one bad JPEG fails alone, a failed preparation fails only its batch, the hand-off holds one batch, and
stop() drains everything admitted. The real ModelRunner runs on the CPU, decoding JPEGs with Pillow."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from serve_testdata import SIZE, image_bytes, make_checkpoint

from gpukit.serve.batcher import Batcher, Outcome


class Staging:
    """prepare/execute that log when each starts and ends; execute of the first batch waits for a gate."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int, float]] = []
        self.gate = threading.Event()
        self.fail_prepare_on: set[int] = set()  # first pixel values whose batch fails to prepare
        self.batches = 0

    def prepare(self, items: list[np.ndarray | bytes]) -> tuple[int, np.ndarray]:
        self.batches += 1
        k = self.batches
        self.log.append(("prepare", k, time.monotonic()))
        batch = np.stack(items)  # type: ignore[arg-type]
        if int(batch[0, 0, 0, 0]) in self.fail_prepare_on:
            raise ValueError("cannot stage")
        return k, batch

    def execute(self, staged: tuple[int, np.ndarray]) -> tuple[np.ndarray, list[str | None]]:
        k, batch = staged
        self.log.append(("execute", k, time.monotonic()))
        if k == 1:
            assert self.gate.wait(10)
        p = batch[:, 0, 0, 0].astype(np.float32) / 255
        errors: list[str | None] = ["odd pixel" if v == 7 else None for v in batch[:, 0, 0, 0]]
        return np.stack([1 - p, p], axis=1), errors


def _img(v: int) -> np.ndarray:
    return np.full((3, 4, 4), v, np.uint8)


def _submit_all(b: Batcher, values: list[int]) -> tuple[list[Outcome | None], list[int], threading.Event]:
    out: list[Outcome | None] = [None] * len(values)
    order: list[int] = []
    done = threading.Event()

    def make(i: int):
        def cb(o: Outcome) -> None:
            out[i] = o
            order.append(i)
            if len(order) == len(values):
                done.set()

        return cb

    far = time.monotonic() + 30
    for i, v in enumerate(values):
        b.submit(_img(v), far, make(i))
    return out, order, done


def test_next_batch_is_prepared_while_the_last_one_runs_and_order_is_kept():
    runner = Staging()
    b = Batcher(runner, max_batch=2, max_wait_s=0.05, queue_size=100)  # batches fill to 2 before they go
    b.start()
    out, order, done = _submit_all(b, [10, 20])
    time.sleep(0.1)  # batch 1 is executing (held at the gate)
    more_out, more_order, more_done = _submit_all(b, [30, 40, 7, 60])
    time.sleep(0.2)
    # batch 2 was prepared while batch 1 ran; batch 3 waits in the queue (the hand-off holds one batch)
    assert [e[:2] for e in runner.log] == [("prepare", 1), ("execute", 1), ("prepare", 2)]
    assert b.depth == 2 and out[0] is None
    runner.gate.set()
    assert done.wait(10) and more_done.wait(10)
    b.stop()
    steps = [e[:2] for e in runner.log]
    assert steps.index(("execute", 1)) < steps.index(("execute", 2)) < steps.index(("execute", 3))
    assert order == [0, 1] and more_order == [0, 1, 2, 3]  # callbacks in submission order
    for o, v in zip(out + more_out, [10, 20, 30, 40, 7, 60], strict=True):
        assert o is not None
        if v == 7:  # a row error fails only its own request
            assert o.error == "odd pixel" and o.probs is None
        else:
            assert o.error is None and o.probs[1] == pytest.approx(v / 255, abs=1e-6)
            assert o.prep_s >= 0 and o.infer_s >= 0
    # batch 2 waited for the executor: that wait is queue time, and it covers the gate's hold (~0.3 s)
    assert more_out[0].queue_s >= 0.2
    assert b.stats.batches == 3 and b.stats.images == 6


def test_callbacks_run_off_the_executor_so_a_slow_one_does_not_hold_back_the_next_batch():
    runner = Staging()
    runner.gate.set()
    b = Batcher(runner, max_batch=2, max_wait_s=0.05, queue_size=100)
    b.start()
    release = threading.Event()
    seen: list[tuple[int, str, float]] = []
    lock = threading.Lock()

    def make(v: int):
        def cb(o: Outcome) -> None:
            with lock:
                seen.append((v, threading.current_thread().name, time.monotonic()))
            if v == 10:  # batch 1's first callback blocks until batch 2 has been executed
                assert release.wait(10)
            if v == 99:
                raise RuntimeError("a caller's callback failed")  # must not stop later answers

        return cb

    far = time.monotonic() + 30
    for v in (10, 20, 30, 99, 50, 60):
        b.submit(_img(v), far, make(v))
    deadline = time.monotonic() + 10
    while sum(1 for e in runner.log if e[0] == "execute") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    executed = [e[1] for e in runner.log if e[0] == "execute"]
    assert executed == [1, 2, 3]  # batches 2 and 3 ran while batch 1's first callback was still blocked
    assert [v for v, *_ in seen] == [10]
    release.set()
    b.stop()
    assert [v for v, *_ in seen] == [10, 20, 30, 99, 50, 60]  # every callback, in order, after one raised
    assert {name for _, name, _ in seen} == {"gpukit-batcher-reply"}


def test_padded_sizes_are_powers_of_two_to_16_then_multiples_of_16():
    from gpukit.serve.model import _buckets

    assert _buckets(64) == [1, 2, 4, 8, 16, 32, 48, 64]
    assert _buckets(40) == [1, 2, 4, 8, 16, 32, 40]
    assert _buckets(5) == [1, 2, 4, 5]
    assert _buckets(1) == [1]


def test_a_failed_preparation_fails_only_its_batch():
    runner = Staging()
    runner.gate.set()
    runner.fail_prepare_on = {99}
    b = Batcher(runner, max_batch=2, max_wait_s=0.0, queue_size=100)
    b.start()
    out, _, done = _submit_all(b, [99, 98])
    assert done.wait(10)
    out2, _, done2 = _submit_all(b, [50])
    assert done2.wait(10)
    b.stop()
    assert [o.error for o in out] == ["ValueError: cannot stage"] * 2  # type: ignore[union-attr]
    assert out2[0] is not None and out2[0].probs[1] == pytest.approx(50 / 255, abs=1e-6)


def test_stop_drains_every_admitted_request():
    runner = Staging()
    runner.gate.set()
    b = Batcher(runner, max_batch=3, max_wait_s=0.01, queue_size=100)
    b.start()
    out, order, done = _submit_all(b, list(range(20, 40)))
    b.stop()
    assert done.is_set() and sorted(order) == list(range(20))
    assert all(o is not None and o.error is None for o in out)


def test_batch_expired_while_waiting_for_the_executor_is_dropped_unrun():
    runner = Staging()
    b = Batcher(runner, max_batch=1, max_wait_s=0.0, queue_size=10)
    b.start()
    got: list[Outcome] = []
    now = time.monotonic()
    b.submit(_img(1), now + 10, got.append)  # held at the gate
    time.sleep(0.05)
    b.submit(_img(2), now + 0.1, got.append)  # prepared at once, expires while batch 1 is held
    time.sleep(0.3)
    runner.gate.set()
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    b.stop()
    assert [e[:2] for e in runner.log] == [("prepare", 1), ("execute", 1), ("prepare", 2)]  # 2 never executed
    assert sorted((o.error or "ok") for o in got) == ["ok", "timeout"] and b.stats.expired == 1


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory):
    from gpukit.serve.model import ModelRunner

    return ModelRunner(make_checkpoint(tmp_path_factory.mktemp("ckpt") / "run"), device="cpu", max_batch=8)


def test_cpu_runner_batches_mixed_items_and_isolates_a_corrupt_jpeg(runner):
    good = image_bytes("JPEG", (40, 30), seed=1)
    square = image_bytes("JPEG", (SIZE, SIZE), seed=2)
    other = image_bytes("JPEG", (40, 30), seed=3)  # same shape as `good`: resized in one group with it
    wide = image_bytes("JPEG", (90, 20), seed=4)
    pixels = np.random.default_rng(5).integers(0, 256, (3, SIZE, SIZE), dtype=np.uint8)
    corrupt = good[: len(good) // 3]
    items: list[np.ndarray | bytes] = [good, corrupt, square, pixels, other, wide]
    staged = runner.prepare(items)
    assert staged.shapes == {"stacked": 1, "resized": 3, "pixels": 1}
    probs, errors = runner.execute(staged)
    assert errors[1] is not None and errors[1].startswith("corrupt: JPEG could not be decoded")
    assert [e is None for i, e in enumerate(errors) if i != 1] == [True] * 5
    assert int(staged.x[1].abs().sum()) == 0  # the failed row is zeros
    for i, item in enumerate(items):  # each row is what that image gives alone (grouping changes nothing)
        if i == 1:
            continue
        alone, alone_errors = runner.run_items([item])
        assert alone_errors == [None]
        np.testing.assert_allclose(probs[i], alone[0], rtol=0, atol=1e-6)
    assert np.allclose(probs[[0, 2, 3, 4, 5]].sum(axis=1), 1.0, atol=1e-5)
    assert not np.allclose(probs[0], probs[4])  # different images: different rows


def test_cpu_runner_behind_the_pipelined_batcher(runner):
    b = Batcher(runner, max_batch=4, max_wait_s=0.02, queue_size=100)
    b.start()
    imgs = [image_bytes("JPEG", (30 + i, 24), seed=10 + i) for i in range(9)]
    imgs[4] = b"\xff\xd8\xff not really a jpeg"
    got: dict[int, Outcome] = {}
    done = threading.Event()

    def make(i: int):
        def cb(o: Outcome) -> None:
            got[i] = o
            if len(got) == len(imgs):
                done.set()

        return cb

    for i, data in enumerate(imgs):
        b.submit(data, time.monotonic() + 30, make(i))
    assert done.wait(30)
    b.stop()
    for i, data in enumerate(imgs):
        if i == 4:
            assert got[i].error is not None and got[i].error.startswith("corrupt:") and got[i].probs is None
            continue
        alone, _ = runner.run_items([data])
        assert got[i].error is None
        np.testing.assert_allclose(got[i].probs, alone[0], rtol=0, atol=1e-6)


def test_cpu_runner_stacks_images_of_the_right_size_without_resizing(runner):
    import io

    import torch
    from PIL import Image

    items: list[np.ndarray | bytes] = [image_bytes("JPEG", (SIZE, SIZE), seed=20 + i) for i in range(4)]
    staged = runner.prepare(items)
    assert staged.shapes == {"stacked": 4, "resized": 0, "pixels": 0} and staged.x.shape[0] == 4
    for i, data in enumerate(items):  # each staged row is that JPEG's decoded pixels, untouched
        ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).transpose(2, 0, 1)  # as gpukit predict reads it
        assert torch.equal(staged.x[i], torch.from_numpy(ref.copy()))
    probs, errors = runner.execute(staged)
    assert errors == [None] * 4 and probs.shape == (4, 2)
    assert not np.allclose(probs[0], probs[1])
