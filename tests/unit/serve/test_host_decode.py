"""`gpukit serve --host-decode-threads N`: with a batch decoder in the model process, part of each batch's JPEGs is
decoded on host threads (simplejpeg) beside it. On a CPU device the batch decoder is Pillow, which gives the same
pixels as libjpeg-turbo through simplejpeg, so a split batch must stage exactly what an unsplit one stages."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from serve_testdata import SIZE, image_bytes, make_checkpoint, outcomes

from gpukit.errors import ConfigError
from gpukit.serve.config import HOST_DECODE_THREADS, ServeConfig
from gpukit.serve.staging import HostDecoder, Stager


def _items() -> list[np.ndarray | bytes]:
    """Every kind a batch holds: S×S JPEGs (straight into their rows), JPEGs of other sizes (resized with their
    shape's group), a grayscale one, a broken one, decoded pixels, a CMYK one (libjpeg-turbo refuses RGB output)."""
    square = [image_bytes("JPEG", (SIZE, SIZE), seed=40 + i) for i in range(6)]
    other = [image_bytes("JPEG", (40, 30), seed=50 + i) for i in range(3)]
    good = image_bytes("JPEG", (SIZE, SIZE), seed=60)
    broken = good[:20] + b"\0" * 30 + good[50:]  # garbage tables: neither decoder decodes it
    pixels = np.random.default_rng(7).integers(0, 256, (3, SIZE, SIZE), dtype=np.uint8)
    grey = image_bytes("JPEG", (SIZE, SIZE), mode="L", seed=61)
    cmyk = image_bytes("JPEG", (SIZE, SIZE), mode="CMYK", seed=62)
    return [square[0], other[0], square[1], pixels, broken, square[2], other[1], grey, square[3], cmyk,
            square[4], other[2], square[5]]  # fmt: skip


@pytest.mark.parametrize("share", [0.3, 0.6, 0.95])
def test_a_split_batch_stages_what_the_batch_decoder_alone_stages(share: float) -> None:
    items = _items()
    alone, split = Stager(SIZE, 16, "cpu"), Stager(SIZE, 16, "cpu")
    split.host = HostDecoder(3)
    split.host.share = share
    jpegs = sum(isinstance(i, bytes) for i in items)
    expected = split.host.count(jpegs)
    assert expected == min(max(round(jpegs * share), 1), jpegs - 1) >= 3
    want, got = alone.prepare(items), split.prepare(items)
    assert got.shapes["host"] == expected
    assert want.shapes["host"] == 0
    assert {k: got.shapes[k] for k in ("stacked", "resized", "pixels")} == {
        k: want.shapes[k] for k in ("stacked", "resized", "pixels")
    }
    assert got.errors == want.errors and sum(e is not None for e in got.errors) == 1
    assert got.errors[4] is not None and got.errors[4].startswith("corrupt: JPEG could not be decoded")
    assert torch.equal(got.x, want.x)  # every row, the broken one's zeros included
    assert split.host._batch_s is not None and split.host._host_s is not None  # both sides measured


def test_host_rows_grow_and_are_reused_across_batches() -> None:
    split = Stager(SIZE, 32, "cpu")
    split.host = HostDecoder(2)
    split.host.share = 0.5
    small = [image_bytes("JPEG", (SIZE, SIZE), seed=70 + i) for i in range(8)]
    large = [image_bytes("JPEG", (SIZE, SIZE), seed=80 + i) for i in range(30)]
    alone = Stager(SIZE, 32, "cpu")
    for batch in (small, large, small[::-1]):
        split.host.share = 0.5  # as set, not as learnt: the sizes of the buffer are what is checked
        got = split.prepare(batch)  # type: ignore[arg-type]
        assert got.shapes["host"] == len(batch) // 2
        assert torch.equal(got.x, alone.prepare(batch).x)  # type: ignore[arg-type]
    assert len(split._host_rows) >= 15 and tuple(split._host_rows.shape[1:]) == (SIZE, SIZE, 3)


def test_the_share_settles_where_both_sides_finish_together() -> None:
    host = HostDecoder(3)
    assert host.share == HostDecoder.START_SHARE
    for _ in range(60):  # the batch decoder: 100 µs an image; the host: 300 µs an image on each of 3 threads
        k = host.count(100)
        host._learn(1e-4 * (100 - k), 100 - k, 3e-4 * k, k)
    assert host.share == pytest.approx(0.5, abs=1e-6)
    for _ in range(60):  # the host slows to 900 µs an image (a busy machine): it takes a quarter
        k = host.count(100)
        host._learn(1e-4 * (100 - k), 100 - k, 9e-4 * k, k)
    assert host.share == pytest.approx(0.25, abs=1e-3) and host.count(100) == 25
    host.forget()
    assert host.share == HostDecoder.START_SHARE and host._batch_s is None


def test_count_keeps_both_sides_from_eight_jpegs_on() -> None:
    host = HostDecoder(2)
    host.share = 0.0
    assert [host.count(n) for n in (0, 1, 7, 8, 40)] == [0, 0, 0, 1, 1]
    host.share = 1.0
    assert [host.count(n) for n in (1, 7, 8, 40)] == [1, 7, 7, 39]
    assert HostDecoder(0).count(100) == 0 and HostDecoder(0).pool is None


def test_without_simplejpeg_there_are_no_host_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpukit.serve import decode

    monkeypatch.setattr(decode, "_SIMPLEJPEG", False)  # as when it is not installed
    host = HostDecoder(4)
    assert host.threads == 0 and host.pool is None and host.count(100) == 0


def test_split_batches_behind_the_batcher_answer_as_one_at_a_time(tmp_path) -> None:
    from gpukit.serve.batcher import Batcher
    from gpukit.serve.model import ModelRunner

    runner = ModelRunner(make_checkpoint(tmp_path / "run"), device="cpu", max_batch=16)
    runner.warm_batch_decoder("nvjpeg", host_threads=2)
    assert runner.stager.host.threads == 2 and runner.stager.host.share == HostDecoder.START_SHARE  # warm-up forgot
    items = _items() * 3
    b = Batcher(runner, max_batch=16, max_wait_s=0.05, queue_size=100)
    b.start()
    got = outcomes(b, items)
    b.stop()
    reference = ModelRunner(make_checkpoint(tmp_path / "run2"), device="cpu", max_batch=16)  # same weights (seeded)
    for i, item in enumerate(items):
        alone, errors = reference.run_items([item])
        assert (got[i].error is None) == (errors[0] is None)
        if errors[0] is None:
            np.testing.assert_allclose(got[i].probs, alone[0], rtol=0, atol=1e-6)


def test_host_decode_threads_flag() -> None:
    cfg = ServeConfig(model="m", decode="nvjpeg").validate()  # type: ignore[arg-type]
    assert cfg.host_threads(cuda=True, cpus=16) == 4 and cfg.host_threads(cuda=True, cpus=8) == 2
    assert cfg.host_threads(cuda=True, cpus=128) == HOST_DECODE_THREADS
    assert cfg.host_threads(cuda=False, cpus=16) == 0  # a CPU device: the cores run the model
    assert ServeConfig(model="m", decode="pil").host_threads(cuda=True, cpus=16) == 0  # type: ignore[arg-type]
    assert ServeConfig(model="m", decode="nvimgcodec").host_threads(cuda=True, cpus=16) == 0  # type: ignore[arg-type]
    explicit = ServeConfig(model="m", decode="nvjpeg", host_decode_threads=3).validate()  # type: ignore[arg-type]
    assert explicit.host_threads(cuda=False, cpus=2) == 3
    with pytest.raises(ConfigError, match=r"--host-decode-threads must be in -1\.\.64"):
        ServeConfig(model="m", host_decode_threads=-2).validate()  # type: ignore[arg-type]


def test_host_decode_threads_cli_error(run_cli, tmp_path) -> None:
    r = run_cli("serve", str(make_checkpoint(tmp_path / "run")), "--host-decode-threads", "65", "--device", "cpu")
    assert r.exit_code == 2 and "error: --host-decode-threads must be in -1..64" in r.stderr
    assert "Traceback" not in r.stderr
