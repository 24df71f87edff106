"""``HostShare``: a share of a batch's JPEGs decoded by libjpeg-turbo on host threads while the GPU decoder takes
the rest. On the CPU the "GPU decoder" is Pillow's (the path ``--decode nvjpeg`` takes on a CPU device), so the
split, the order, the fallback and the adaptation are tested with real decoders; nvJPEG's side runs in
tests/gpu/test_serve_gpu.py."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("simplejpeg")

from gpukit.serve.staging import HostShare, _pil_decode, _split, host_share_threads

S = 48


def _jpeg(size: tuple[int, int], seed: int, grey: bool = False) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
    buf = io.BytesIO()
    (img.convert("L") if grey else img).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _pil_batch(datas: list[bytes]) -> list[object]:
    return [_pil_decode(d) for d in datas]


def test_split_covers_every_row_once() -> None:
    for n in range(0, 20):
        for parts in range(1, 6):
            pieces = _split(n, parts)
            assert [i for r in pieces for i in r] == list(range(n))
            assert len(pieces) == min(parts, n)
            if pieces:
                assert max(map(len, pieces)) - min(map(len, pieces)) <= 1


def test_count_leaves_the_gpu_at_least_one() -> None:
    share = HostShare(1, S, 8, "cpu", share=0.95)
    try:
        assert [share.count(n) for n in (0, 1, 2, 8)] == [0, 0, 1, 7]
        share.share = 0.02
        assert share.count(8) == 0
    finally:
        share.close()


def test_pixels_order_and_failures_are_the_gpu_decoders() -> None:
    """Half the batch on two host threads: every row's pixels are the other decoder's (libjpeg-turbo on both sides
    here), in the caller's order, whatever its size or colour; what libjpeg-turbo refuses (a cut file, bytes that
    are no JPEG) gets the other decoder's answer, which is the error it raises."""
    datas = [_jpeg((S, S), i) for i in range(6)] + [_jpeg((70, 30), 6), _jpeg((S, S), 7, grey=True)]
    datas += [b"\xff\xd8\xff not a jpeg", _jpeg((S, S), 9)[:400], _jpeg((S, S), 10)]
    share = HostShare(2, S, len(datas), "cpu", share=0.5)
    calls: list[int] = []

    def gpu(batch: list[bytes]) -> list[object]:
        calls.append(len(batch))
        return _pil_batch(batch)

    try:
        out = share.decode(datas, gpu)
    finally:
        share.close()
    assert calls[0] == len(datas) - 6  # the host took round(0.5 × 11) = 6: the last six
    assert calls[1:] == [2]  # its two refusals went to the other decoder after all
    for got, want in zip(out, _pil_batch(datas), strict=True):
        if isinstance(want, Exception):
            assert type(got) is type(want)
            continue
        assert tuple(got.shape) == tuple(want.shape)
        assert int((got.int() - want.int()).abs().max()) == 0


def test_share_moves_towards_equal_finishing() -> None:
    share = HostShare(1, S, 8, "cpu", share=0.3)
    try:
        share._adapt(gpu_rate=1000.0, host_rate=3000.0)  # the host is 3× faster: 75 % is where both end together
        assert share.share == pytest.approx(0.3 + 0.25 * (0.75 - 0.3))
        for _ in range(60):
            share._adapt(1000.0, 3000.0)
        assert share.share == pytest.approx(0.75, abs=1e-3)
        for _ in range(200):
            share._adapt(1000.0, 1e-3)  # a stalled host side: the share falls to its floor, not to zero
        assert share.share == pytest.approx(0.02)
    finally:
        share.close()


def test_decode_adapts_on_real_batches_and_threads_run_meanwhile() -> None:
    """A slow "GPU" side (each call sleeps 50 ms): the host side's share grows batch after batch. Its rate counts
    from the batch's start, so it can beat the GPU side's only if the threads decoded while the GPU call ran."""
    datas = [_jpeg((S, S), i) for i in range(16)]
    share = HostShare(2, S, 16, "cpu", share=0.25)

    def slow_gpu(batch: list[bytes]) -> list[object]:
        import time

        time.sleep(0.05)
        return _pil_batch(batch)

    try:
        shares = []
        for _ in range(4):
            out = share.decode(datas, slow_gpu)
            assert len(out) == 16 and all(tuple(o.shape) == (3, S, S) for o in out)
            shares.append(share.share)
    finally:
        share.close()
    assert shares == sorted(shares) and shares[-1] > 0.5
    assert share.rates["host"] > share.rates["gpu"]


@pytest.mark.parametrize(("requested", "cpus", "want"), [(None, 16, 4), (None, 8, 2), (None, 4, 0), (None, 64, 4),
                                                          (0, 16, 0), (6, 2, 6)])  # fmt: skip
def test_thread_count(requested: int | None, cpus: int, want: int) -> None:
    assert host_share_threads(requested, cpus) == want


def test_no_threads_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        HostShare(0, S, 8, "cpu")
