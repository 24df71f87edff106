"""Safe image decoding for the server: the format sniffed from the bytes and checked against an allow-list, the pixel
count checked from the header before any pixel is decoded, and the same resize as `gpukit predict`.

Pillow's own guard against decompression bombs is only a warning up to 2× its limit; here the limit is checked on
the header's width × height, so a 50,000 × 50,000 PNG of a few kilobytes is refused before it allocates anything.
Only the first frame of an animated GIF or WebP is used.

A plain JPEG that Pillow would decode at full size is decoded by simplejpeg (libjpeg-turbo in one call, when it is
installed: the ``serve`` extra) with the same pixels, the same checks before it and the same resize after it; it
skips Pillow's marker parsing in Python and its decoder set-up (a 64 px JPEG's decode stage in the server: 43-49
against 120-131 µs on a 2-core VM, benchmarks/serve-http-cpu_2026-12-04.md). Anything it refuses (a cut or damaged
file) takes Pillow's path, which names the problem.
"""

from __future__ import annotations

import importlib.util
import io
import struct
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from gpukit.serve.request import RequestRejected

__all__ = [
    "ALLOWED_FORMATS",
    "Frame",
    "Probe",
    "batch_decodable",
    "decode_bytes",
    "decode_plain",
    "finish",
    "inline_decodable",
    "inline_frame",
    "nvimgcodec_unavailable",
    "plain_bytes",
    "probe",
    "sniff",
    "warm_decoder",
]

ALLOWED_FORMATS = ("JPEG", "PNG", "GIF", "WEBP")
# Formats we recognise in order to name them when refusing (415); anything else unrecognised is "not an image" (422).
_KNOWN_OTHERS: tuple[tuple[bytes, str], ...] = (
    (b"%PDF", "PDF"),
    (b"<svg", "SVG"),
    (b"<?xml", "XML/SVG"),
    (b"<!doctype html", "HTML"),
    (b"<html", "HTML"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
    (b"\x00\x00\x01\x00", "ICO"),
    (b"PK\x03\x04", "ZIP"),
    (b"\x1f\x8b", "GZIP"),
)


def sniff(data: bytes) -> str:
    """The image format the bytes start with: one of ``ALLOWED_FORMATS``, or a 415/422 ``RequestRejected``."""
    if data[:3] == b"\xff\xd8\xff":
        return "JPEG"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "PNG"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "GIF"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    head = data[:256].lstrip().lower()
    for magic, name in _KNOWN_OTHERS:
        if head.startswith(magic.lower()):
            raise RequestRejected(415, "unsupported_format", f"{name} is not accepted; send JPEG, PNG, GIF or WebP")
    if b"<svg" in head:
        raise RequestRejected(415, "unsupported_format", "SVG is not accepted; send JPEG, PNG, GIF or WebP")
    raise RequestRejected(422, "not_an_image", "the body is not a JPEG, PNG, GIF or WebP image")


@dataclass
class Probe:
    """An image whose header was read and checked: the open (not yet decoded) image and what decoding it costs."""

    fmt: str
    image: Any  # PIL.Image.Image, pixels not decoded yet; None: a plain JPEG for simplejpeg (``plain_bytes``)
    decoded_bytes: int  # width × height × (bands, plus 3 for the RGB copy of a non-RGB image), after draft

    def close(self) -> None:
        """Give back the open image (an image refused before decoding)."""
        if self.image is not None:
            self.image.close()


def _open_checked(data: bytes, max_pixels: int) -> tuple[str, Any]:
    """Sniff, open the header (no pixels decoded yet) and check the pixel count → (format, open image)."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise RequestRejected(400, "empty", "the body is empty")
    fmt = sniff(data)
    try:
        # no warnings.catch_warnings here: it swaps process-wide filters and is not safe on the decode threads;
        # the pixel limit below is checked by hand, and Pillow raises DecompressionBombError past 2× its own
        im = Image.open(io.BytesIO(data), formats=[fmt])
    except Image.DecompressionBombError as exc:
        raise RequestRejected(413, "too_many_pixels", f"{fmt} is too large to decode: {exc}") from None
    except UnidentifiedImageError as exc:
        raise RequestRejected(400, "corrupt", f"{fmt} header could not be read: {exc}") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise RequestRejected(400, "corrupt", f"{fmt} header is corrupt: {exc}") from None
    try:
        _check_frame(fmt, im.size, len(data), getattr(im, "layer", None), max_pixels)
    except RequestRejected:
        im.close()
        raise
    return fmt, im


def _check_frame(fmt: str, size: tuple[int, int], n_bytes: int, layers: Any, max_pixels: int) -> None:
    """The checks on a header's size: some pixels, at most ``max_pixels``, and (JPEG) enough bytes to code them."""
    width, height = size
    if width < 1 or height < 1:
        raise RequestRejected(400, "corrupt", f"{fmt} has no pixels ({width}×{height})")
    if width * height > max_pixels:
        raise RequestRejected(
            413, "too_many_pixels", f"{width}×{height} = {width * height:,} pixels is over the limit of {max_pixels:,}"
        )
    if fmt == "JPEG" and n_bytes < jpeg_min_bytes(width, height, layers):
        raise RequestRejected(
            400,
            "corrupt",
            f"JPEG claims {width}×{height} pixels but holds only {n_bytes:,} bytes: too few to code "
            "them (its size field was changed or its data is cut)",
        )


def jpeg_min_bytes(width: int, height: int, layers: Any) -> int:
    """The fewest bytes any JPEG of this size can hold: every 8×8 block of every component codes at least its DC
    coefficient, one Huffman bit at the least (progressive AC scans can skip blocks, the DC scan cannot). Pillow and
    libjpeg fill the rows a file lacks with grey and raise nothing (a patched size field decoded as a 200), so a
    file below this bound is refused before any decoding. ``layers``: Pillow's ``JpegImageFile.layer``, (id,
    horizontal sampling, vertical sampling, table) per component; unknown → one full-size component."""
    comps = [(int(h), int(v)) for _id, h, v, *_ in layers] if layers else [(1, 1)]
    h_max, v_max = max(h for h, _ in comps), max(v for _, v in comps)
    blocks = 0
    for h, v in comps:
        w_c, h_c = -(-width * h // h_max), -(-height * v // v_max)
        blocks += -(-w_c // 8) * -(-h_c // 8)
    return blocks // 8


def probe(data: bytes, size: int, max_pixels: int, plain: bool = True, frame: Frame | None = None) -> Probe:
    """Header only: sniffed, checked against ``max_pixels``, JPEG draft mode set (decoders downscale by 1/2..1/8
    first, as ``gpukit.train.data.decode_image`` does), and the bytes decoding will allocate. A plain JPEG that
    simplejpeg may decode (``plain_bytes``; ``plain=False``: never) is not opened by Pillow at all. ``frame``: its
    markers as ``inline_frame`` read them already."""
    nbytes = plain_bytes(data, size, max_pixels, frame) if plain else None
    if nbytes is not None:
        return Probe("JPEG", None, nbytes)
    fmt, im = _open_checked(data, max_pixels)
    im.draft("RGB", (size, size))
    width, height = im.size
    bands = len(im.getbands())
    return Probe(fmt, im, width * height * (bands + (0 if im.mode == "RGB" else 3)))


def finish(p: Probe, data: bytes, size: int) -> np.ndarray:
    """Decode a probed image → uint8 (3, size, size) RGB; a truncated one is refused (400 corrupt). A plain JPEG goes
    to simplejpeg; what it refuses is opened by Pillow after all, which names the problem (its header was checked)."""
    from PIL import Image

    if p.image is None:
        image = decode_plain(data, size)
        if image is not None:
            return image
        p = probe(data, size, 1 << 62, plain=False)  # the pixel limit held already: plain_bytes checked it
    with p.image as im:
        try:
            rgb = im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise RequestRejected(400, "corrupt", f"{p.fmt} is truncated or corrupt: {exc}") from None
        if p.fmt == "PNG" and not png_rows_complete(data, im):
            raise RequestRejected(400, "corrupt", "PNG is truncated: its image data ends before its last row")
    return np.asarray(rgb, dtype=np.uint8).transpose(2, 0, 1).copy()


def batch_decodable(data: bytes, max_pixels: int) -> bool:
    """Whether the model process may decode these bytes itself (``--decode nvjpeg``): a baseline-or-progressive
    JPEG in RGB or grayscale whose markers read cleanly up to its scan, with a quantization table before it
    (``_jpeg_frame``), within the pixel limit, ending with its end-of-image marker (a truncated one goes the
    Pillow path, which names the problem). Only the header is read; raises like ``decode_bytes`` for bad input.

    Anything else goes through Pillow's header parser (about 18 µs; it raises for bad input) and then Pillow's
    path. Pillow's parser skips bytes that are not a marker, so it opens a JPEG whose quantization tables were
    overwritten; nvJPEG then decoded such a file without an error on an H100 (garbage pixels, an answer where
    Pillow says 400: benchmarks/serve-host-decode_h100_2026-12-06.md), so only what ``_jpeg_frame`` reads goes to
    the batch decoder."""
    frame = _jpeg_frame(data) if data[:3] == b"\xff\xd8\xff" else None
    if frame is not None:
        _check_frame("JPEG", frame.size, len(data), frame.layers, max_pixels)
        return data.rstrip(b"\0")[-2:] == b"\xff\xd9"
    _, im = _open_checked(data, max_pixels)
    im.close()
    return False


def inline_decodable(data: bytes, size: int, max_pixels: int) -> bool:
    """Whether an HTTP process's event loop decodes this image itself instead of handing it to its decode threads: a
    sequential (not progressive) plain JPEG of at most ``INLINE_PIXELS`` pixels and ``INLINE_BYTES`` bytes, for a
    model input of at most ``INLINE_SIDE`` pixels a side (the resize's cost). Its decode costs about a tenth of a
    millisecond and is bounded by those sizes (a progressive JPEG's cost grows with its number of scans); the hand-off
    to a thread and back costs more than that under load. Anything else, and any image over ``max_pixels`` (refused
    there with 413), takes the threads."""
    return inline_frame(data, size, max_pixels) is not None


def inline_frame(data: bytes, size: int, max_pixels: int) -> Frame | None:
    """``inline_decodable``'s answer as the frame it read (None: not on the loop), for ``probe`` to use again."""
    if len(data) > INLINE_BYTES or size > INLINE_SIDE or data[:3] != b"\xff\xd8\xff":
        return None
    frame = _jpeg_frame(data)
    if frame is None or frame.progressive or frame.size[0] * frame.size[1] > min(INLINE_PIXELS, max_pixels):
        return None
    return frame


INLINE_PIXELS = 128 * 128
INLINE_BYTES = 64 << 10
INLINE_SIDE = 256
_SOF_PLAIN = frozenset({0xC0, 0xC1, 0xC2})  # baseline, extended, progressive Huffman
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


class Frame(NamedTuple):
    """A plain JPEG's frame header, read from its markers (``_jpeg_frame``)."""

    size: tuple[int, int]  # (width, height)
    layers: list[tuple[int, int, int, int]]  # Pillow's ``JpegImageFile.layer``: (id, h sampling, v sampling, table)
    progressive: bool


def _jpeg_frame(data: bytes) -> Frame | None:
    """The frame of a plain 8-bit RGB/grayscale JPEG (baseline, extended or progressive), read from its markers up to
    the first scan; None for anything else (fill bytes, other frame types, two frames, a cut segment, 4 components,
    no quantization table before the scan), which then takes Pillow's parser."""
    pos, end, frame, tables = 2, len(data), None, False
    while pos + 4 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker in _STANDALONE:
            pos += 2
            continue
        length = (data[pos + 2] << 8) | data[pos + 3]
        if length < 2 or pos + 2 + length > end:
            return None
        if marker == 0xDA:  # start of scan: the header is complete
            return frame if tables else None
        tables = tables or marker == 0xDB  # a quantization table (DQT)
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header
            if frame is not None or marker not in _SOF_PLAIN:
                return None
            frame = _frame(data[pos + 4 : pos + 2 + length], marker == 0xC2)
            if frame is None:
                return None
        elif marker in (0x00, 0xFF, 0xD8, 0xD9):
            return None
        pos += 2 + length
    return None


def _frame(s: bytes, progressive: bool) -> Frame | None:
    if len(s) < 6 or s[0] != 8 or s[5] not in (1, 3) or len(s) < 6 + 3 * s[5]:
        return None
    height, width = (s[1] << 8) | s[2], (s[3] << 8) | s[4]
    layers = [(s[i], s[i + 1] // 16, s[i + 1] & 15, s[i + 2]) for i in range(6, 6 + 3 * s[5], 3)]
    return Frame((width, height), layers, progressive)


def decode_bytes(data: bytes, size: int, max_pixels: int) -> np.ndarray:
    """Bytes → uint8 (3, size, size) RGB, exactly as ``gpukit.train.data.decode_image`` does for a file."""
    return finish(probe(data, size, max_pixels), data, size)


_SIMPLEJPEG: Any = None  # the module once imported; False when it is not installed


def _simplejpeg() -> Any:
    global _SIMPLEJPEG
    if _SIMPLEJPEG is None:
        try:
            import simplejpeg

            _SIMPLEJPEG = simplejpeg
        except ImportError:
            _SIMPLEJPEG = False
    return _SIMPLEJPEG


def plain_bytes(data: bytes, size: int, max_pixels: int, frame: Frame | None = None) -> int | None:
    """The bytes decoding takes (as ``Probe.decoded_bytes``) when ``decode_plain`` may decode this image: a plain
    8-bit RGB or grayscale JPEG (``_jpeg_frame``; ``frame``: read already) that Pillow would decode at full size,
    since its draft mode scales only from twice ``size`` on. None: Pillow's path (``probe``). A header that fails a
    check raises as ``probe``."""
    if data[:3] != b"\xff\xd8\xff" or not _simplejpeg():
        return None
    frame = frame or _jpeg_frame(data)
    if frame is None:
        return None
    (width, height), layers, _ = frame
    _check_frame("JPEG", (width, height), len(data), layers, max_pixels)
    if min(width // size, height // size) >= 2:
        return None
    return width * height * (3 if len(layers) == 3 else 1 + 3)  # Pillow's L image and its RGB copy


def decode_plain(data: bytes, size: int) -> np.ndarray | None:
    """simplejpeg's decode of an image ``plain_bytes`` accepted → uint8 (3, size, size), the pixels Pillow's path
    gives; None when it refuses the data (strict: also a recoverable error such as a cut scan) or fails."""
    from PIL import Image

    try:
        rgb = _simplejpeg().decode_jpeg(data, colorspace="RGB")
    except Exception:  # ValueError for what libjpeg-turbo refuses; whatever else it raises, Pillow's path answers
        return None
    if rgb.shape[:2] != (size, size):
        rgb = np.asarray(Image.fromarray(rgb).resize((size, size), Image.Resampling.BILINEAR))
    return np.ascontiguousarray(rgb.transpose(2, 0, 1))


_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # PNG colour type → samples per pixel
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def png_rows_complete(data: bytes, im: Any) -> bool:
    """Whether the PNG's image data inflates to every row its header claims. Pillow fills missing rows with zeros
    and raises nothing when the zlib stream ends early (a 6324² header over 200 rows of data decoded as 200)."""
    if getattr(im, "n_frames", 1) > 1 or data[12:16] != b"IHDR":
        return True  # APNG: Pillow checks the frames it reads
    width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", data[16:29])
    bits = depth * _CHANNELS.get(colour, 4)
    passes = _ADAM7 if interlace else ((0, 0, 1, 1),)
    want = 0
    for x0, y0, dx, dy in passes:
        w, h = -(-(width - x0) // dx), -(-(height - y0) // dy)
        if w > 0 and h > 0:
            want += h * (1 + -(-(w * bits) // 8))
    inflate, got, pos = zlib.decompressobj(), 0, 8
    while pos + 8 <= len(data) and got < want:
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            chunk = data[pos + 8 : pos + 8 + length]
            while chunk and got < want:  # bounded output per step: never holds the image twice
                try:
                    got += len(inflate.decompress(chunk, 1 << 20))
                except zlib.error:
                    return False
                chunk = inflate.unconsumed_tail
        pos += 12 + length
    return got >= want


def warm_decoder(size: int) -> None:
    """Decode one small image of each format now, so the first request does not pay for Pillow's plugin imports."""
    from PIL import Image

    for fmt in ("JPEG", "PNG", "WEBP", "GIF"):
        buf = io.BytesIO()
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buf, fmt)
        decode_bytes(buf.getvalue(), size, 64 * 64)
        if fmt == "JPEG":
            finish(probe(buf.getvalue(), size, 64 * 64, plain=False), buf.getvalue(), size)  # Pillow's JPEG path too


def nvimgcodec_unavailable() -> str | None:
    """Why ``--decode nvimgcodec`` cannot run here, or None."""
    try:
        found = importlib.util.find_spec("nvidia.nvimgcodec") is not None
    except ModuleNotFoundError:  # no ``nvidia`` namespace at all
        found = False
    return None if found else "nvImageCodec is not installed (pip install 'gpukit[decode]')"
