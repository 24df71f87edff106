"""Augmentation, done on the GPU, one batch at a time: shear, zoom, rotation, an optional flip and a colour gain.

The seed (Keras ``ImageDataGenerator``): ``rescale=1/255, shear_range=0.2, zoom_range=0.2, horizontal_flip=True``.
Decoding and augmenting on the CPU is the wall that caps training speed (see ``benchmarks/``), so gpukit keeps the
decoded images as uint8 and applies a random affine transform on the device with ``affine_grid`` + ``grid_sample``
— one batched kernel pair per step — then multiplies each image by its colour gain. Each epoch still sees freshly
augmented images.

Recipes (``--augment``): ``default`` is the seed's shear and zoom *without* the flip — a mirrored 3 is "Ɛ", and
digits, text, many medical and satellite images are not mirror-symmetric (Keras, too, flips only when asked);
``seed`` is the article's recipe exactly, flip included; ``none`` only rescales. Each knob is its own flag on top.

Keras semantics, ported:
- ``shear_range=0.2`` is a shear *angle in degrees* (Keras >= 2.2.5 converts it with ``np.deg2rad``), drawn
  uniformly from [-0.2°, 0.2°]. ``shear_deg`` keeps that meaning; pass e.g. 11.5 for the old radians behaviour.
- ``zoom_range=0.2`` draws the row and column zoom factors independently from [0.8, 1.2]; a factor > 1 samples a
  larger area, i.e. zooms out (Keras' convention).
- ``rotation_range`` is degrees, uniform in [-r, r]; ``colour`` is a brightness gain uniform in [1-c, 1+c]
  (Keras' ``brightness_range``), clamped to [0, 1] after.
- ``fill_mode="nearest"`` is ``padding_mode="border"``; Keras interpolates with order 1, so ``bilinear`` here.
- The flip mirrors the output with probability 0.5; ``rescale`` divides by 255.
The transform parameters for a whole epoch are drawn up front from a CPU generator seeded by (seed, epoch), so a run
is reproducible on any device and a resumed run draws exactly what the uninterrupted one would have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["RECIPES", "AugmentConfig", "apply_affine", "apply_gain", "draw_gains", "draw_thetas", "recipe", "to_float"]


@dataclass(frozen=True)
class AugmentConfig:
    """One run's augmentation; ``enabled=False`` only rescales. The defaults are the ``default`` recipe."""

    enabled: bool = True
    shear_deg: float = 0.2
    zoom: float = 0.2
    hflip: bool = False
    rotation_deg: float = 0.0
    colour: float = 0.0

    def validate(self) -> None:
        for name, low, high in (("shear_deg", 0, 90), ("zoom", 0, 0.9), ("rotation_deg", 0, 180), ("colour", 0, 1)):
            value = getattr(self, name)
            if not low <= value <= high:  # NaN fails too
                flag = {"shear_deg": "--shear-deg", "rotation_deg": "--rotation-deg"}.get(name, f"--{name}")
                raise ConfigError(f"{flag} must be in [{low}, {high}], not {value}")

    @property
    def draws_gain(self) -> bool:
        return self.enabled and self.colour > 0


RECIPES = {
    "default": AugmentConfig(),
    "seed": AugmentConfig(shear_deg=0.2, zoom=0.2, hflip=True),  # the article's ImageDataGenerator, as written
    "none": AugmentConfig(enabled=False),
}


def recipe(
    name: str,
    *,
    hflip: bool | None = None,
    shear_deg: float | None = None,
    zoom: float | None = None,
    rotation_deg: float | None = None,
    colour: float | None = None,
) -> AugmentConfig:
    """A named recipe with the knobs given (not None) put on top; raises ``ConfigError`` for an unknown name."""
    if name not in RECIPES:
        raise ConfigError(f"unknown --augment {name!r}", hint=f"choose one of {', '.join(RECIPES)}")
    given: dict[str, Any] = {
        "hflip": hflip,
        "shear_deg": shear_deg,
        "zoom": zoom,
        "rotation_deg": rotation_deg,
        "colour": colour,
    }
    cfg = replace(RECIPES[name], **{k: v for k, v in given.items() if v is not None})
    if name == "none" and any(v for v in given.values()):
        cfg = replace(cfg, enabled=True, shear_deg=shear_deg or 0.0, zoom=zoom or 0.0)
    cfg.validate()
    return cfg


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
    # the flip is drawn whether or not it is used, so turning it on or off leaves the other draws unchanged
    coin = torch.rand(n, generator=generator) < 0.5
    flip = coin if cfg.hflip else torch.zeros(n, dtype=torch.bool)
    # Keras, in (row, col): [[1, -sin s], [0, cos s]] @ diag(zx, zy). In affine_grid's (x=col, y=row) order:
    #   x_in = cos(s)·zy·x ;  y_in = -sin(s)·zy·x + zx·y ; a flip of the output negates x (the first column).
    sign = torch.where(flip, -1.0, 1.0)
    theta[:, 0, 0] = torch.cos(shear) * zoom_cols * sign
    theta[:, 1, 0] = -torch.sin(shear) * zoom_cols * sign
    theta[:, 1, 1] = zoom_rows
    if cfg.rotation_deg > 0:  # rotate the sampling grid: R(a) @ [shear·zoom·flip], (x, y) order
        angle = (torch.rand(n, generator=generator) * 2 - 1) * math.radians(cfg.rotation_deg)
        c, s = torch.cos(angle), torch.sin(angle)
        rot = torch.stack([torch.stack([c, -s], 1), torch.stack([s, c], 1)], 1)  # (n, 2, 2)
        theta[:, :, :2] = rot @ theta[:, :, :2]
    return theta


def draw_gains(n: int, cfg: AugmentConfig, generator: torch.Generator) -> torch.Tensor:
    """Per-image brightness gains (n,), uniform in [1-c, 1+c]; all ones when the colour knob is off."""
    import torch

    if not cfg.draws_gain:
        return torch.ones(n)
    return 1 - cfg.colour + torch.rand(n, generator=generator) * 2 * cfg.colour


def to_float(batch_u8: torch.Tensor) -> torch.Tensor:
    """uint8 (B,3,S,S) → float32 in [0, 1] (the seed's ``rescale=1/255``)."""
    return batch_u8.float().mul_(1.0 / 255.0)


def apply_affine(batch_u8: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Augment a uint8 batch (B,3,S,S) with per-image matrices theta (B,2,3) on its device → float32 [0, 1]."""
    import torch.nn.functional as F

    x = to_float(batch_u8)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)  # (B,S,S,2), input coords per output pixel
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def apply_gain(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    """Multiply each image (B,3,S,S) float [0, 1] by its gain (B,) and clamp back into [0, 1]."""
    return x.mul_(gain.view(-1, 1, 1, 1)).clamp_(0.0, 1.0)
