"""Safe decoding and body parsing: formats sniffed from the bytes, the pixel limit before decoding, the same pixels
as `gpukit predict`'s decoder, and a strict multipart splitter."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from serve_testdata import image_bytes, tables_overwritten

from gpukit.serve.decode import decode_bytes, sniff
from gpukit.serve.metrics import server_timing
from gpukit.serve.request import RequestRejected, images_from_body, read_body


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "GIF"])
def test_decode_matches_predicts_decoder(tmp_path, fmt):
    from gpukit.train.data import decode_image

    data = image_bytes(fmt, size=(73, 41), seed=3)
    path = tmp_path / f"x.{fmt.lower()}"
    path.write_bytes(data)
    got = decode_bytes(data, 24, 10**6)
    assert got.shape == (3, 24, 24) and got.dtype == np.uint8
    assert np.array_equal(got, decode_image(str(path), 24))


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (b"%PDF-1.7 ...", 415, "unsupported_format"),
        (b"  <svg xmlns='x'/>", 415, "unsupported_format"),
        (b"<!DOCTYPE html><p>", 415, "unsupported_format"),
        (b"BM\x00\x00", 415, "unsupported_format"),
        (b"hello world", 422, "not_an_image"),
        (b"\xff\xd8\xff\xe0garbage", 400, "corrupt"),
        (b"", 400, "empty"),
    ],
)
def test_refusals_name_the_problem(data, status, code):
    with pytest.raises(RequestRejected) as info:
        decode_bytes(data, 16, 10**6)
    assert (info.value.status, info.value.code) == (status, code)
    assert info.value.to_dict()["detail"]


def test_pixel_limit_is_checked_before_decoding():
    data = image_bytes("PNG", size=(300, 200))
    assert decode_bytes(data, 16, 60_000).shape == (3, 16, 16)
    with pytest.raises(RequestRejected, match="60,000 pixels is over the limit of 59,999") as info:
        decode_bytes(data, 16, 59_999)
    assert info.value.status == 413
    assert sniff(data) == "PNG"


def _chunks(*parts: bytes):
    """An ASGI ``receive`` handing over ``parts`` as the body's chunks."""
    messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]
    messages = messages or [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        return messages.pop(0)

    return receive


def test_body_limit_while_reading():
    assert asyncio.run(read_body(_chunks(b"ab", b"cd"), None, 4)) == b"abcd"
    with pytest.raises(RequestRejected) as info:
        asyncio.run(read_body(_chunks(b"ab", b"cde"), None, 4))
    assert info.value.status == 413
    with pytest.raises(RequestRejected, match="5 bytes"):
        asyncio.run(read_body(_chunks(), "5", 4))  # a declared length over the limit: refused unread
    with pytest.raises(RequestRejected, match="not a number"):
        asyncio.run(read_body(_chunks(), "five", 4))


def test_multipart_splitting():
    body = (
        b'--XyZ\r\nContent-Disposition: form-data; name="note"\r\n\r\nhi\r\n'
        b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n'
        b"\x89PNG\r\n--not-a-boundary\r\n"
        b'--XyZ\r\nContent-Disposition: form-data; name="files"; filename="b.jpg"\r\n\r\nJPEGDATA\r\n--XyZ--\r\n'
    )
    files = images_from_body("multipart/form-data; boundary=XyZ", body, many=True)
    assert files == [b"\x89PNG\r\n--not-a-boundary", b"JPEGDATA"]
    with pytest.raises(RequestRejected, match="one image per request"):
        images_from_body("multipart/form-data; boundary=XyZ", body, many=False)
    with pytest.raises(RequestRejected, match="truncated"):
        images_from_body("multipart/form-data; boundary=XyZ", body[:-10], many=True)
    with pytest.raises(RequestRejected) as info:
        images_from_body("text/plain", b"x", many=False)
    assert info.value.status == 415
    assert images_from_body("image/jpeg", b"raw", many=False) == [b"raw"]


def test_server_timing_header():
    header = server_timing({"read": 0.0001, "decode": 0.002, "queue": 0.0005, "infer": 0.003, "encode": 1e-5}, 0.006)
    assert header == (
        "read;dur=0.100, decode;dur=2.000, queue;dur=0.500, infer;dur=3.000, encode;dur=0.010, total;dur=6.000"
    )


def test_a_part_may_contain_the_boundary_when_it_does_not_follow_a_crlf():
    boundary = "XyZ"
    content = b"\xff\xd8\xff--XyZ inside, as RFC 7578 allows\r\n-- XyZ also"
    body = (
        b'preamble\r\n--XyZ\r\nContent-Disposition: form-data; name="file"\r\n\r\n'
        + content
        + b'\r\n--XyZ  \r\nContent-Disposition: form-data; name="other"\r\n\r\nx\r\n--XyZ--\r\n'
    )
    assert images_from_body(f"multipart/form-data; boundary={boundary}", body, False) == [content]
    bad = b'--XyZ\r\nContent-Disposition: form-data; name="file"\r\n\r\nabc--XyZ--'  # no CRLF: no delimiter
    with pytest.raises(RequestRejected) as exc:
        images_from_body(f"multipart/form-data; boundary={boundary}", bad, False)
    assert exc.value.code == "bad_form"


def _png(width: int, height: int, rows: int, interlace: int = 0) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x80" * (width * 3) for _ in range(rows))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, interlace)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def test_a_png_whose_data_ends_before_its_last_row_is_corrupt():
    assert decode_bytes(_png(300, 200, 200), 16, 10**6).shape == (3, 16, 16)  # whole: decoded
    with pytest.raises(RequestRejected) as exc:  # Pillow itself fills the missing rows with zeros, silently
        decode_bytes(_png(300, 2000, 200), 16, 10**7)
    assert (exc.value.status, exc.value.code) == (400, "corrupt")
    for mode in ("RGB", "L", "P", "RGBA", "1"):  # real PNGs of every kind pass the check
        data = image_bytes("PNG", size=(37, 23), mode=mode)
        assert decode_bytes(data, 16, 10**6).shape == (3, 16, 16)


def test_decoded_bytes_come_from_the_header_after_draft():
    from gpukit.serve.decode import probe

    jpeg = probe(image_bytes("JPEG", size=(800, 600)), 64, 10**7)
    assert jpeg.image.size == (100, 75) and jpeg.decoded_bytes == 100 * 75 * 3  # JPEG draft: decoded at 1/8
    jpeg.image.close()
    png = probe(image_bytes("PNG", size=(800, 600), mode="RGBA"), 64, 10**7)
    assert png.decoded_bytes == 800 * 600 * (4 + 3)  # RGBA, then its RGB copy
    png.image.close()


def test_budget_never_waits_and_gives_back():
    from gpukit.serve.core import Budget

    b = Budget(100)
    assert b.take(60) and not b.take(41) and b.take(40)
    b.give(60)
    assert b.used_bytes == 40 and b.take(60) and not b.take(1)


def _jpeg(size: tuple[int, int], **save: object) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, (120, 130, 140)).save(out, "JPEG", **save)  # one flat colour: the smallest a JPEG gets
    return out.getvalue()


def test_a_jpeg_whose_size_field_was_patched_is_corrupt_and_real_ones_pass():
    from gpukit.serve.decode import batch_decodable, jpeg_min_bytes

    for size in ((8, 8), (1000, 700), (2048, 2048)):  # the most compressible real files stay above the bound
        for save in ({}, {"optimize": True}, {"progressive": True}, {"subsampling": 0}, {"quality": 5}):
            data = _jpeg(size, **save)
            assert decode_bytes(data, 16, 10**7).shape == (3, 16, 16), (size, save)
    data = bytearray(_jpeg((64, 64), quality=90))
    sof = data.find(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (3000).to_bytes(2, "big") + (4000).to_bytes(2, "big")  # height, width
    with pytest.raises(RequestRejected) as exc:  # Pillow decodes it as 200 (grey rows), libjpeg only warns
        decode_bytes(bytes(data), 16, 10**8)
    assert (exc.value.status, exc.value.code) == (400, "corrupt") and "4000×3000" in exc.value.message
    with pytest.raises(RequestRejected):  # the nvJPEG path reads the same header check
        batch_decodable(bytes(data), 10**8)
    assert jpeg_min_bytes(4000, 3000, [(1, 2, 2, 0), (2, 1, 1, 1), (3, 1, 1, 1)]) == (500 * 375 + 2 * 250 * 188) // 8


def test_a_jpeg_without_a_readable_quantization_table_never_reaches_the_batch_decoder():
    """Pillow's header parser skips bytes that are not a marker, so it opens a JPEG whose tables were overwritten, and
    nvJPEG decoded one without an error on an H100. Such files, and ones with no DQT segment at all, take Pillow's
    path, which refuses them (400 corrupt); an intact JPEG still goes to the batch decoder."""
    from gpukit.serve.decode import _jpeg_frame, batch_decodable

    data = _jpeg_of("RGB", quality=90)
    assert batch_decodable(data, 10**7) and _jpeg_frame(data) is not None
    overwritten = tables_overwritten(data)
    cut = data
    while (at := cut.find(b"\xff\xdb")) >= 0:  # every DQT segment taken out
        cut = cut[:at] + cut[at + 2 + int.from_bytes(cut[at + 2 : at + 4], "big") :]
    assert cut != data and b"\xff\xda" in cut
    for bad in (overwritten, cut):
        assert _jpeg_frame(bad) is None and batch_decodable(bad, 10**7) is False
        with pytest.raises(RequestRejected) as exc:
            decode_bytes(bad, 16, 10**7)
        assert (exc.value.status, exc.value.code) == (400, "corrupt")


def _jpeg_of(mode: str, size=(50, 30), **save) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(1)
    im = Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).convert(mode)
    buf = io.BytesIO()
    im.save(buf, "JPEG", **save)
    return buf.getvalue()


@pytest.mark.parametrize(
    "data",
    [
        _jpeg_of("RGB"),
        _jpeg_of("RGB", subsampling=0),
        _jpeg_of("RGB", progressive=True),
        _jpeg_of("L"),
        _jpeg_of("CMYK"),
        _jpeg_of("RGB", exif=b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00"),
        _jpeg_of("RGB", size=(4000, 4000), quality=5),
    ],
    ids=["420", "444", "progressive", "gray", "cmyk", "exif", "large"],
)
def test_the_plain_jpeg_header_reader_agrees_with_pillow(data):
    from PIL import Image

    from gpukit.serve import decode

    with Image.open(io.BytesIO(data)) as im:
        pil = (im.size, list(im.layer), im.mode, im.info.get("progressive"))
    frame = decode._jpeg_frame(data)
    if frame is not None:  # what it reads is what Pillow reads; what it does not know goes to Pillow
        assert (frame[0], frame[1]) == (pil[0], pil[1]) and pil[2] in ("RGB", "L")
        assert frame.progressive == bool(pil[3])
    else:
        assert pil[2] == "CMYK"
    for limit in (10**8, 1000):  # the same answer, or the same refusal, as Pillow's path
        want: object
        try:  # Pillow's header, read as the batch decoder would be asked (what the plain reader does not read: no)
            fmt, im = decode._open_checked(data, limit)
            with im:
                want = fmt == "JPEG" and im.mode in ("RGB", "L") and data.rstrip(b"\0")[-2:] == b"\xff\xd9"
                want = want and frame is not None
        except RequestRejected as exc:
            want = (exc.status, exc.code)
        try:
            got: object = decode.batch_decodable(data, limit)
        except RequestRejected as exc:
            got = (exc.status, exc.code)
        assert got == want
    assert decode._jpeg_frame(data[:150]) is None  # a header cut before its scan is not read as plain
