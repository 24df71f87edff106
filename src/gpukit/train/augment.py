"""Augmentation, done on the device, one batch at a time: a random crop, shift, shear, zoom, rotation, an optional
flip, and a colour jitter (brightness, contrast, saturation).

Decoding and augmenting on the CPU is the wall that caps training speed (see ``benchmarks/``), so gpukit keeps the
decoded images as uint8 and applies one random affine transform per image on the device with ``affine_grid`` +
``grid_sample`` — one batched kernel pair per step — then the colour jitter as a few elementwise kernels. Every
parameter of an epoch is drawn up front from a CPU generator seeded by (seed, epoch) and read on the device by the
step counter, so a step never waits for the host, a run is reproducible on any device, and a resumed run draws
exactly what the uninterrupted one would have.

Recipes (``--augment``):
- ``default``: for a few hundred images trained from scratch, where the object may be anywhere: a random resized
  crop whose window's area is log-uniform in [80 %, 125 %] of the image's (aspect 3:4–4:3; a smaller window
  anywhere inside the image, a larger one anywhere around it), a shift of up to ±10 % of the side, a rotation of
  up to ±30°, and a colour jitter (brightness, contrast and saturation each ×[0.7, 1.3]); **no flip** — a
  mirrored 3 is "Ɛ", and digits, text, many medical and satellite images are not mirror-symmetric (Keras, too,
  flips only when asked). The crop, shift and rotation apply to **half** the images (``geometry_p``); the other half
  pass unresampled, as sharp as the images the model will be asked about: resampling at sub-pixel offsets blurs every
  training image, and a 4–8 px object's corners are what tells a square from a triangle (0.964 → 0.970–0.974 held out,
  mean of twelve runs on three separately generated sets, twice;
  ``benchmarks/train-recipe-screen_h200_2026-12-03.md``).
  The rotation: objects that lie at any angle (4–8 px squares vs triangles drawn at random rotations) were
  learned from 320 images at 0.962 held out without it, 0.972 with ±15° and 0.991 with ±45° (nine runs each on three
  separately generated sets; ``benchmarks/train-recipe-screen_h200_2026-12-03-round3.md``). ±30° is where
  AutoAugment and RandAugment stop, and keeps two classes that differ by a quarter turn (horizontal vs vertical
  stripes, "/" vs "\\") apart: a class that differs from another by a small tilt needs ``--rotation-deg 0``.
  The crop zooms out as often and as far as in: a crop that only zooms in (80–100 % of the area, gpukit's first
  default) shows the net every object larger than the data holds it, and the smallest objects of a class at test
  time were then outside what it trained on (4–8 px squares vs triangles: 0.92 → 0.97 held out on a separately
  generated set). Chosen by measurement over a suite of small sets (``benchmarks/scripts/train_recipe.py``).
- ``seed``: the article's Keras ``ImageDataGenerator(rescale=1/255, shear_range=0.2, zoom_range=0.2,
  horizontal_flip=True)``, exactly; ``classic``: the same without the flip (gpukit's default before the crop);
- ``none``: only rescales. Each knob is its own flag on top of a recipe.

Keras semantics, ported (``seed``, ``classic``):
- ``shear_range=0.2`` is a shear *angle in degrees* (Keras >= 2.2.5 converts it with ``np.deg2rad``), drawn
  uniformly from [-0.2°, 0.2°]. ``shear_deg`` keeps that meaning; pass e.g. 11.5 for the old radians behaviour.
- ``zoom_range=0.2`` draws the row and column zoom factors independently from [0.8, 1.2]; a factor > 1 samples a
  larger area, i.e. zooms out (Keras' convention).
- ``rotation_range`` is degrees, uniform in [-r, r]; ``colour`` is a brightness gain uniform in [1-c, 1+c]
  (Keras' ``brightness_range``), clamped to [0, 1] after.
- ``fill_mode="nearest"`` is ``padding_mode="border"``; Keras interpolates with order 1, so ``bilinear`` here.
- The flip mirrors the output with probability 0.5; ``rescale`` divides by 255.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["RECIPES", "AugmentConfig", "apply_affine", "apply_jitter", "draw_jitter", "draw_thetas", "recipe",
           "to_float"]  # fmt: skip

KNOBS = ("hflip", "shear_deg", "zoom", "rotation_deg", "colour", "crop", "shift", "contrast", "saturation",
         "geometry_p")  # fmt: skip
_RANGES = (("shear_deg", 0, 90), ("zoom", 0, 0.9), ("rotation_deg", 0, 180), ("colour", 0, 1), ("crop", 0.05, 1),
           ("shift", 0, 0.5), ("contrast", 0, 1), ("saturation", 0, 1), ("geometry_p", 0, 1))  # fmt: skip


@dataclass(frozen=True)
class AugmentConfig:
    """One run's augmentation; ``enabled=False`` only rescales. The defaults are the ``default`` recipe.
    ``crop``: a random resized crop's window covers an area share log-uniform in [crop, 1/crop] (1: no crop);
    ``shift``: the largest translation,
    a share of the side; ``colour``, ``contrast``, ``saturation``: factors uniform in [1-c, 1+c]; ``geometry_p``:
    the share of images the resampling part (crop, shift, shear, zoom, rotation) applies to, the rest passing as they
    are but for the flip, an exact mirror (1 for the seed's recipes, as Keras)."""

    enabled: bool = True
    shear_deg: float = 0.0
    zoom: float = 0.0
    hflip: bool = False
    rotation_deg: float = 30.0
    colour: float = 0.3
    crop: float = 0.8
    shift: float = 0.1
    contrast: float = 0.3
    saturation: float = 0.3
    geometry_p: float = 0.5

    def validate(self) -> None:
        for name, low, high in _RANGES:
            value = getattr(self, name)
            if not low <= value <= high:  # NaN fails too
                flag, usual = f"--{name.replace('_', '-')}", getattr(RECIPES["default"], name)
                raise ConfigError(f"{flag} must be in [{low}, {high}], not {value}",
                                  hint=f"the default recipe uses {flag} {usual}")  # fmt: skip

    @property
    def jitters(self) -> bool:
        """Whether the recipe draws a colour jitter (brightness, contrast, saturation)."""
        return self.enabled and (self.colour > 0 or self.contrast > 0 or self.saturation > 0)


_NEUTRAL = AugmentConfig(rotation_deg=0.0, colour=0.0, crop=1.0, shift=0.0, contrast=0.0, saturation=0.0,
                         geometry_p=1.0)  # all off  # fmt: skip
_SHEAR_ZOOM = replace(_NEUTRAL, shear_deg=0.2, zoom=0.2)
RECIPES = {
    "default": AugmentConfig(),
    "seed": replace(_SHEAR_ZOOM, hflip=True),  # the article's ImageDataGenerator, as written
    "classic": _SHEAR_ZOOM,  # the seed's without the flip: gpukit's default before the crop and the jitter
    "none": AugmentConfig(enabled=False),
}


def recipe(name: str, **knobs: Any) -> AugmentConfig:
    """A named recipe with the knobs given (not None) put on top (``KNOBS`` names them); raises ``ConfigError``
    for an unknown name."""
    if name not in RECIPES:
        raise ConfigError(f"unknown --augment {name!r}", hint=f"choose one of {', '.join(RECIPES)}")
    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise TypeError(f"unknown augmentation knobs {sorted(unknown)}")
    given = {k: v for k, v in knobs.items() if v is not None}
    cfg = replace(RECIPES[name], **given)
    if name == "none" and any((v < 1) if k in ("crop", "geometry_p") else bool(v) for k, v in given.items()):
        cfg = replace(_NEUTRAL, **given)  # `none` plus a knob: that knob alone
    cfg.validate()
    return cfg


def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    import torch

    return low + torch.rand(n, generator=generator) * (high - low)


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
    if cfg.crop < 1 or cfg.shift > 0:
        _crop_and_shift(theta, cfg, generator)
    if cfg.geometry_p < 1:  # drawn last: the draws above are the same whatever geometry_p is
        unchanged = torch.rand(n, generator=generator) >= cfg.geometry_p
        theta[unchanged] = 0.0
        theta[unchanged, 0, 0] = sign[unchanged]  # the flip, an exact mirror that blurs nothing, stays
        theta[unchanged, 1, 1] = 1.0
    return theta


def _crop_and_shift(theta: torch.Tensor, cfg: AugmentConfig, generator: torch.Generator) -> None:
    """Compose a random resized crop and a shift onto ``theta`` in place: the output samples a window whose area, a
    share of the image's, is log-uniform in [crop, 1/crop] (as often larger as smaller: the objects are zoomed in
    and out alike, so their sizes keep the distribution they have in the data), of aspect 3:4–4:3, placed anywhere
    inside the image (or the image anywhere inside a larger one), then moved by up to ±shift of the side.
    In affine_grid's coordinates the image spans [-1, 1]: a window of half-widths (w, h) at (cx, cy) is
    x_in = w·x + cx, y_in = h·y + cy."""
    import torch

    n = theta.shape[0]
    area = torch.exp(_uniform(n, math.log(cfg.crop), -math.log(cfg.crop), generator))
    aspect = torch.exp(_uniform(n, math.log(3 / 4), math.log(4 / 3), generator))
    w = torch.sqrt(area * aspect)
    h = torch.sqrt(area / aspect)
    cx = (torch.rand(n, generator=generator) * 2 - 1) * (1 - w).abs()
    cy = (torch.rand(n, generator=generator) * 2 - 1) * (1 - h).abs()
    dx = (torch.rand(n, generator=generator) * 2 - 1) * 2 * cfg.shift
    dy = (torch.rand(n, generator=generator) * 2 - 1) * 2 * cfg.shift
    theta[:, 0, :2] *= w[:, None]
    theta[:, 1, :2] *= h[:, None]
    theta[:, 0, 2] = cx + dx
    theta[:, 1, 2] = cy + dy


def draw_jitter(n: int, cfg: AugmentConfig, generator: torch.Generator) -> torch.Tensor:
    """Per-image colour factors (n, 3): brightness, contrast, saturation, each uniform in [1-c, 1+c] (ones for a
    knob that is off). Drawn whatever the knobs, so turning one on leaves the others' draws unchanged."""
    import torch

    u = torch.rand(n, 3, generator=generator) * 2 - 1
    if not cfg.enabled:
        return torch.ones(n, 3)
    return 1 + u * torch.tensor([cfg.colour, cfg.contrast, cfg.saturation])


def to_float(batch_u8: torch.Tensor) -> torch.Tensor:
    """uint8 (B,3,S,S) → float32 in [0, 1] (the seed's ``rescale=1/255``)."""
    return batch_u8.float().mul_(1.0 / 255.0)


def apply_affine(batch_u8: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Augment a uint8 batch (B,3,S,S) with per-image matrices theta (B,2,3) on its device → float32 [0, 1]."""
    import torch.nn.functional as F

    x = to_float(batch_u8)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)  # (B,S,S,2), input coords per output pixel
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def apply_jitter(x: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    """Colour-jitter images (B,3,S,S) float [0, 1] with per-image factors (B, 3), torchvision's ``ColorJitter``
    arithmetic without the hue: brightness scales, saturation blends with the grey image, contrast with its mean
    grey; clamped into [0, 1]. All on the device: no host sync."""
    b, c, s = (factors[:, k].view(-1, 1, 1, 1) for k in range(3))
    x = (x * b).clamp_(0.0, 1.0)
    grey = 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]
    x = (grey + (x - grey) * s).clamp_(0.0, 1.0)
    mean = grey.mean((2, 3), keepdim=True)
    return (mean + (x - mean) * c).clamp_(0.0, 1.0)
