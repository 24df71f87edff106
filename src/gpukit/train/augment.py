"""The seed's augmentation, done on the GPU, one batch at a time.

The seed (Keras ``ImageDataGenerator``): ``rescale=1/255, shear_range=0.2, zoom_range=0.2, horizontal_flip=True``.
Decoding and augmenting on the CPU is the wall that caps training speed (see ``benchmarks/``), so gpukit keeps the
decoded images as uint8 and applies the same random affine transform on the device with ``affine_grid`` +
``grid_sample`` — one batched kernel pair per step. Each epoch still sees freshly augmented images.

Keras semantics, ported:
- ``shear_range=0.2`` is a shear *angle in degrees* (Keras >= 2.2.5 converts it with ``np.deg2rad``), drawn
  uniformly from [-0.2°, 0.2°]. ``shear_deg`` keeps that meaning; pass e.g. 11.5 for the old radians behaviour.
- ``zoom_range=0.2`` draws the row and column zoom factors independently from [0.8, 1.2]; a factor > 1 samples a
  larger area, i.e. zooms out (Keras' convention).
- ``fill_mode="nearest"`` is ``padding_mode="border"``; Keras interpolates with order 1, so ``bilinear`` here.
- The flip mirrors the output with probability 0.5; ``rescale`` divides by 255.
The transform parameters for a whole epoch are drawn up front from a CPU generator seeded by (seed, epoch), so a run
is reproducible on any device and a resumed run draws exactly what the uninterrupted one would have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["AugmentConfig", "apply_affine", "draw_thetas", "to_float"]


@dataclass(frozen=True)
class AugmentConfig:
    """The seed's augmentation; ``enabled=False`` only rescales."""

    enabled: bool = True
    shear_deg: float = 0.2
    zoom: float = 0.2
    hflip: bool = True


def draw_thetas(n: int, cfg: AugmentConfig, generator: torch.Generator) -> torch.Tensor:
    """Affine matrices (n, 2, 3), float32 on the CPU, mapping output to input coordinates (``affine_grid``'s way)."""
    import torch

    theta = torch.zeros(n, 2, 3)
    if not cfg.enabled:
        theta[:, 0, 0] = 1.0
        theta[:, 1, 1] = 1.0
        return theta
    shear = (torch.rand(n, generator=generator) * 2 - 1) * math.radians(cfg.shear_deg)
    zoom_rows = 1 - cfg.zoom + torch.rand(n, generator=generator) * 2 * cfg.zoom
    zoom_cols = 1 - cfg.zoom + torch.rand(n, generator=generator) * 2 * cfg.zoom
    flip = torch.rand(n, generator=generator) < 0.5 if cfg.hflip else torch.zeros(n, dtype=torch.bool)
    # Keras, in (row, col): [[1, -sin s], [0, cos s]] @ diag(zx, zy). In affine_grid's (x=col, y=row) order:
    #   x_in = cos(s)·zy·x ;  y_in = -sin(s)·zy·x + zx·y ; a flip of the output negates x (the first column).
    sign = torch.where(flip, -1.0, 1.0)
    theta[:, 0, 0] = torch.cos(shear) * zoom_cols * sign
    theta[:, 1, 0] = -torch.sin(shear) * zoom_cols * sign
    theta[:, 1, 1] = zoom_rows
    return theta


def to_float(batch_u8: torch.Tensor) -> torch.Tensor:
    """uint8 (B,3,S,S) → float32 in [0, 1] (the seed's ``rescale=1/255``)."""
    return batch_u8.float().mul_(1.0 / 255.0)


def apply_affine(batch_u8: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Augment a uint8 batch (B,3,S,S) with per-image matrices theta (B,2,3) on its device → float32 [0, 1]."""
    import torch.nn.functional as F

    x = to_float(batch_u8)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)  # (B,S,S,2), input coords per output pixel
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
