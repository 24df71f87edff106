"""simplejpeg decodes the plain JPEGs that Pillow would decode at full size, with Pillow's pixels to the last bit, the
same checks before and the same resize after; whatever it refuses, and whatever it may not take, goes Pillow's way."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile

from gpukit.serve import decode
from gpukit.serve.decode import decode_bytes, decode_plain, finish, plain_bytes, probe
from gpukit.serve.request import RequestRejected

pytest.importorskip("simplejpeg", reason="simplejpeg is not installed (pip install 'gpukit[serve]')")


def _jpeg(width: int, height: int, mode: str = "RGB", seed: int = 0, **save: object) -> bytes:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    px = np.stack([(x * 7 + y * c) % 256 for c in (3, 5, 11)], axis=-1) + rng.integers(0, 40, (height, width, 3))
    buf = io.BytesIO()
    # Pillow sizes a progressive file's one-shot buffer at 2 bytes a pixel, too few for a noisy 4:4:4 one at quality
    # 100 ("broken data stream", e.g. 122×202): its floor, ImageFile.MAXBLOCK, is raised while this one is written
    block, ImageFile.MAXBLOCK = ImageFile.MAXBLOCK, max(ImageFile.MAXBLOCK, 8 * width * height)
    try:
        Image.fromarray(np.clip(px, 0, 255).astype(np.uint8)).convert(mode).save(buf, "JPEG", **save)
    finally:
        ImageFile.MAXBLOCK = block
    return buf.getvalue()


def _pillow(data: bytes, size: int) -> np.ndarray:
    """Pillow's path alone, as before simplejpeg."""
    return finish(probe(data, size, 10**8, plain=False), data, size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    width=st.integers(1, 300),
    height=st.integers(1, 300),
    size=st.sampled_from([16, 24, 64, 100, 224]),
    mode=st.sampled_from(["RGB", "L"]),
    subsampling=st.sampled_from([0, 1, 2]),
    quality=st.integers(5, 100),
    progressive=st.booleans(),
)
def test_simplejpeg_gives_pillows_pixels_and_bytes(width, height, size, mode, subsampling, quality, progressive):
    data = _jpeg(width, height, mode, seed=width * height, quality=quality, subsampling=subsampling,
                 progressive=progressive)  # fmt: skip
    nbytes = plain_bytes(data, size, 10**8)
    pillow = probe(data, size, 10**8, plain=False)
    scaled = pillow.image.size != (width, height)  # Pillow's draft mode decodes it at 1/2 .. 1/8
    pillow.image.close()
    assert (nbytes is None) == scaled
    if nbytes is not None:
        assert nbytes == pillow.decoded_bytes
        got = decode_plain(data, size)
        assert got is not None and got.shape == (3, size, size) and got.flags.c_contiguous
        assert np.array_equal(got, _pillow(data, size))
    assert np.array_equal(decode_bytes(data, size, 10**8), _pillow(data, size))


def test_what_simplejpeg_takes_and_what_goes_to_pillow():
    assert plain_bytes(_jpeg(50, 30), 24, 10**8) == 50 * 30 * 3
    assert plain_bytes(_jpeg(50, 30, "L"), 24, 10**8) == 50 * 30 * 4  # Pillow's L image, then its RGB copy
    assert plain_bytes(_jpeg(48, 48), 24, 10**8) is None  # 2× the input on both sides: Pillow decodes at 1/2
    assert plain_bytes(_jpeg(50, 30, "CMYK"), 24, 10**8) is None  # not a plain frame
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    assert plain_bytes(png.getvalue(), 24, 10**8) is None
    with pytest.raises(RequestRejected) as exc:  # over the pixel limit: refused as probe refuses it
        plain_bytes(_jpeg(50, 30), 24, 1000)
    assert (exc.value.status, exc.value.code) == (413, "too_many_pixels")


def test_a_cut_jpeg_is_refused_by_simplejpeg_and_named_by_pillow():
    data = _jpeg(200, 150, quality=95)
    cut = data[: len(data) * 3 // 4]  # above the header's byte bound, missing the end of the scan
    assert plain_bytes(cut, 224, 10**8) is not None  # its header passes
    assert decode_plain(cut, 224) is None
    with pytest.raises(RequestRejected) as exc:
        decode_bytes(cut, 224, 10**8)
    assert (exc.value.status, exc.value.code) == (400, "corrupt")


def test_without_simplejpeg_pillow_decodes_everything(monkeypatch):
    data = _jpeg(50, 30)
    want = decode_bytes(data, 24, 10**8)
    monkeypatch.setattr(decode, "_SIMPLEJPEG", False)  # as when it is not installed
    assert plain_bytes(data, 24, 10**8) is None
    assert np.array_equal(decode_bytes(data, 24, 10**8), want)
