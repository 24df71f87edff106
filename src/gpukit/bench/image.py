"""The Mandelbrot picture as a coloured PNG (`gpukit bench mandelbrot --save-image PATH`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["mandelbrot_rgb", "save_mandelbrot_png"]


def mandelbrot_rgb(counts: np.ndarray, max_iter: int, cmap: str = "twilight_shifted") -> np.ndarray:
    """(H, W) iteration counts → (H, W, 3) uint8 colours; points that never escape are black."""
    from matplotlib import colormaps

    inside = counts >= max_iter
    # log scale spreads the many low counts; normalise to [0, 1)
    t = np.log1p(counts.astype(np.float64)) / np.log1p(max(max_iter, 1))
    rgb = (colormaps[cmap](t)[..., :3] * 255).astype(np.uint8)
    rgb[inside] = 0
    return rgb


def save_mandelbrot_png(path: str | Path, size_text: str = "seed") -> Path:
    """Compute the frame ``size_text`` (WIDTHxHEIGHTxITER) with the float64 reference and write it as PNG."""
    from PIL import Image

    from gpukit.bench.workloads.mandelbrot import WORKLOAD

    size = WORKLOAD.parse_size(size_text)
    counts = WORKLOAD.reference(size, WORKLOAD.make_inputs(size, np.random.default_rng(0)))
    out = Path(path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mandelbrot_rgb(counts, size["max_iter"])).save(out, format="PNG")
    return out
