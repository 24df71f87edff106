"""A small seed-CNN checkpoint (random weights, through the real checkpoint writer) and images of many kinds."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import numpy as np

SIZE = 16
CLASSES = ["blue", "red"]
# inductor's kernel cache for the tests that compile (unit and integration): one folder, so the second compile of the
# same tiny network loads its kernels instead of building them again (~18 s cold on 2 cores, ~4 s warm)
INDUCTOR_CACHE = Path(tempfile.gettempdir()) / f"gpukit-tests-inductor-{os.getuid()}"


def make_checkpoint(folder: Path, size: int = SIZE, classes: list[str] | None = None, seed: int = 0) -> Path:
    """``folder/best.json`` + ``best.safetensors`` as `gpukit train` writes them; returns the folder."""
    import torch

    from gpukit.train import checkpoint
    from gpukit.train.models import build_model

    classes = classes or CLASSES
    torch.manual_seed(seed)
    net = build_model("seed-cnn", size, len(classes))
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v for k, v in net.state_dict().items()}
    checkpoint.save(folder, "best", tensors, {"model": "seed-cnn", "classes": classes, "image_size": size})
    return folder


def image_bytes(fmt: str = "JPEG", size: tuple[int, int] = (40, 30), mode: str = "RGB", seed: int = 0) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    im = Image.fromarray(pixels).convert(mode) if mode != "P" else Image.fromarray(pixels).quantize(16)
    buf = io.BytesIO()
    im.save(buf, fmt)
    return buf.getvalue()


def tables_overwritten(jpeg: bytes) -> bytes:
    """``jpeg`` with 30 bytes of its first quantization table segment (DQT) zeroed: Pillow's header parser skips the
    garbage and opens it, and nvJPEG decoded such a file without an error on an H100."""
    at = jpeg.find(b"\xff\xdb")
    return jpeg[:at] + b"\0" * 30 + jpeg[at + 30 :]


def huffman_undefined(jpeg: bytes) -> bytes:
    """``jpeg`` with a clean header whose scan names Huffman tables (3/3) that were never defined: a decoder fails."""
    sos = jpeg.find(b"\xff\xda")
    broken = bytearray(jpeg)
    for c in range(jpeg[sos + 4]):  # every component's DC/AC table ids
        broken[sos + 6 + 2 * c] = 0x33
    return bytes(broken)
