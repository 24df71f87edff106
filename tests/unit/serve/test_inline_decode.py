"""The one small sequential JPEG of a request is decoded on the HTTP process's event loop, not handed to its decode
threads; anything larger, progressive, not a JPEG, or one of several images still takes the threads."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from PIL import Image

from gpukit.serve.config import ServeConfig
from gpukit.serve.core import Core
from gpukit.serve.decode import INLINE_BYTES, INLINE_PIXELS, INLINE_SIDE, decode_bytes, inline_decodable
from gpukit.serve.metrics import Metrics
from gpukit.serve.model import ModelInfo
from gpukit.serve.request import RequestRejected


def _jpeg(side: int, progressive: bool = False, quality: int = 90, noise: bool = False) -> bytes:
    rng = np.random.default_rng(side)
    px = rng.integers(0, 256, (side, side, 3), dtype=np.uint8) if noise else np.full((side, side, 3), 90, np.uint8)
    buf = io.BytesIO()
    Image.fromarray(px).save(buf, "JPEG", quality=quality, progressive=progressive)
    return buf.getvalue()


def _png(side: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.zeros((side, side, 3), np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def test_which_images_the_loop_decodes_itself() -> None:
    assert INLINE_PIXELS == 128 * 128 and INLINE_SIDE == 256
    assert inline_decodable(_jpeg(64), 64, 10**8) and inline_decodable(_jpeg(128), 224, 10**8)
    assert not inline_decodable(_jpeg(129), 64, 10**8)  # over the pixel bound
    assert not inline_decodable(_jpeg(64), 512, 10**8)  # a large model input: the resize would cost the loop
    assert not inline_decodable(_jpeg(64, progressive=True), 64, 10**8)  # a progressive scan count is unbounded
    assert not inline_decodable(_png(32), 64, 10**8)
    assert not inline_decodable(_jpeg(64), 64, 64 * 63)  # over --max-pixels: the threads refuse it with 413
    big = _jpeg(128, quality=100, noise=True)
    assert len(big) > INLINE_BYTES // 2
    padded = big[:-2] + b"\0" * (INLINE_BYTES - len(big) + 1) + b"\xff\xd9"  # same header, over the byte bound
    assert inline_decodable(big, 64, 10**8) == (len(big) <= INLINE_BYTES)
    assert not inline_decodable(padded, 64, 10**8)


class _NoPool:
    """Fails the test if anything is handed to the decode threads."""

    _max_workers = 2
    used = 0

    def submit(self, *a: object, **k: object) -> None:
        _NoPool.used += 1
        raise AssertionError("the pool was used")


def _core(**config: object) -> Core:
    core = Core(ServeConfig(model="m", decode="pil", **config), Metrics())  # type: ignore[arg-type]
    core.info = ModelInfo("seed-cnn", ("a", "b"), 64, "unused")
    return core


def test_one_small_jpeg_is_decoded_on_the_loop_with_the_pools_result() -> None:
    core = _core()
    data = _jpeg(48, noise=True)
    core.pool.shutdown()
    core.pool = _NoPool()  # type: ignore[assignment]
    (image,) = asyncio.run(core.decode_all([data], deadline=1e18))
    np.testing.assert_array_equal(image, decode_bytes(data, 64, 10**8))
    assert core.budget.used_bytes == 0  # taken and given back


def test_several_images_or_a_large_one_take_the_threads() -> None:
    core = _core()
    small, large = _jpeg(48), _jpeg(300)
    two = asyncio.run(core.decode_all([small, small], deadline=1e18))
    (one,) = asyncio.run(core.decode_all([large], deadline=1e18))
    assert all(np.array_equal(a, decode_bytes(small, 64, 10**8)) for a in two)
    np.testing.assert_array_equal(one, decode_bytes(large, 64, 10**8))
    core.pool.shutdown()
    core.pool = _NoPool()  # type: ignore[assignment]
    with pytest.raises(AssertionError, match="the pool was used"):
        asyncio.run(core.decode_all([large], deadline=1e18))


def test_the_loop_path_keeps_the_deadline_and_the_budget() -> None:
    data = _jpeg(64)
    core = _core()
    with pytest.raises(RequestRejected) as late:
        asyncio.run(core.decode_all([data], deadline=0.0))
    assert late.value.status == 504
    core.budget.used_bytes = core.budget.total_bytes  # every byte in use by other requests
    with pytest.raises(RequestRejected) as busy:
        asyncio.run(core.decode_all([data], deadline=1e18))
    assert busy.value.status == 503 and busy.value.code == "decode_busy"
    core.pool.shutdown()
