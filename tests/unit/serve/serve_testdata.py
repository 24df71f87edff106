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
