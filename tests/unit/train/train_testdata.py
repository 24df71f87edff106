"""Tiny generated image folders for the train tests: two classes with a learnable difference."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_folder(
    root: Path, per_class: int = 24, size: int = 16, seed: int = 0, junk: bool = True, three: bool = False
) -> Path:
    """``root/red/*.png|jpg`` and ``root/blue/*``; with ``junk``, a corrupt .jpg, a truncated .jpg and a .txt."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    kinds = [("blue", 2), ("red", 0)] + ([("green", 1)] if three else [])
    for name, channel in kinds:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            pixels = rng.integers(0, 110, (size, size, 3), dtype=np.uint8)
            pixels[..., channel] = rng.integers(150, 256, (size, size), dtype=np.uint8)
            suffix = ".png" if i % 2 else ".jpg"
            Image.fromarray(pixels).save(folder / f"{name}_{i:03d}{suffix}")
    if junk:
        (root / "red" / "corrupt.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
        good = (root / "blue" / "blue_000.jpg").read_bytes()
        (root / "blue" / "truncated.jpg").write_bytes(good[: len(good) // 2])
        (root / "red" / "notes.txt").write_text("not an image")
    return root
