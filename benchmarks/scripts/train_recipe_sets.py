"""The small image sets `train_recipe.py` measures the recipe on, each written as ``ROOT/data/...`` (what
`gpukit train` sees) and ``ROOT/heldout/CLASS/*`` (images never used for training or for choosing an epoch).

Packaged real images (saved at the image size, 64 by default, as the default command trains):
- ``digits-3v7``, ``digits-5``: scikit-learn's ``load_digits`` scans (8×8, 16 grey levels), classes 3 and 7 / five
  classes; ``lfw-faces``: scikit-image's ``lfw_subset``, 100 faces and 100 non-faces (25×25). Split 60/20/20 into
  ``data/train``, ``data/val`` and ``heldout``.
- ``photo-textures``: scikit-image's grass, gravel and brick photographs (512×512, each CC0), random square crops
  of 64–160 px; ``data`` crops come from the left 65 % of each photograph, held-out ones from the right 35 %, so no
  held-out pixel was ever trained on.
Generated (300 images a class: 200 in ``data/CLASS`` for gpukit's own split, 100 held out), each object drawn at
4× and area-averaged down (anti-aliased), at a random place, size, rotation and colour that contrasts with its
background, so neither position, size nor colour says the class:
- ``shapes-circle-square``: plain backgrounds, radius 6–20 px (the square of equal area);
- ``shapes-triangle-star``: noisy backgrounds, radius 8–22 px;
- ``shapes-clutter``: a cross vs a ring on a smooth random-colour field with distractor bars;
- ``shapes-small``: a square vs a triangle of radius 4–8 px: small objects;
- ``stripes``: a striped patch at a random place, horizontal vs vertical stripes (``stripes_images``, checked by
  ``check_stripes``), 32×32 upscaled to 64.

Probe sets (``PROBES``: never used to choose the recipe, built after it was fixed, to test it on kinds of task it was
not tuned on; numpy and Pillow only), 300 images a class as above:
- ``probe-colour``: a red vs a blue object (hue 340–20° vs 200–240°, saturation and value 0.5–1) of a random shape
  (circle, square, triangle), place, size and angle on a random grey: the class is the colour alone;
- ``probe-count``: one vs two circles (radius 4–9 px, one colour per image, not touching);
- ``probe-size``: a small vs a large object (radius 4–7 vs 11–18 px), shape drawn at random from four;
- ``probe-letters``: stroked capitals E, F, L, T (4 classes) at a random place, height 14–34 px, stroke 2–4 px,
  slant ±15°, on a noisy random background.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

SIZE = 64
SUPER = 4  # shapes are drawn at SUPER × SIZE and area-averaged down
PER_CLASS = 300  # generated sets: 200 for `gpukit train`, 100 held out
IN_DATA = 200


def save(img: np.ndarray, path: Path, size: int) -> None:
    """A float image in [0, 1] (H,W) or (H,W,3) → an RGB PNG of size×size (bilinear)."""
    from PIL import Image

    arr = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    im = Image.fromarray(arr).convert("RGB")
    if im.size != (size, size):
        im = im.resize((size, size), Image.Resampling.BILINEAR)
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path)


def split_write(root: Path, images: np.ndarray, labels: np.ndarray, names: list[str], size: int, seed: int) -> None:
    """Per class: 60 % train, 20 % val, 20 % held-out (root/data/{train,val}/CLASS, root/heldout/CLASS)."""
    rng = np.random.default_rng(seed)
    for label, name in enumerate(names):
        idx = np.flatnonzero(labels == label)
        rng.shuffle(idx)
        n_val = n_held = round(0.2 * len(idx))
        parts = {"heldout": idx[:n_held], "data/val": idx[n_held : n_held + n_val], "data/train": idx[n_held + n_val :]}
        for part, members in parts.items():
            for i in members:
                save(images[i], root / part / name / f"{name}_{i:05d}.png", size)


def build_digits(root: Path, classes: list[int], size: int = SIZE) -> None:
    from sklearn.datasets import load_digits

    d = load_digits()
    keep = np.isin(d.target, classes)
    images, target = d.images[keep] / 16.0, d.target[keep]
    labels = np.searchsorted(np.asarray(sorted(classes)), target)
    split_write(root, 1.0 - images, labels, [f"digit{c}" for c in sorted(classes)], size, seed=1234)


def build_lfw(root: Path, size: int = SIZE) -> None:
    from skimage import data

    faces = data.lfw_subset()  # (200, 25, 25): the first 100 are faces, the rest are not
    split_write(root, faces, np.r_[np.zeros(100, int), np.ones(100, int)], ["face", "nonface"], size, seed=1234)


def build_textures(root: Path, size: int = SIZE, in_data: int = 140, held: int = 60) -> None:
    """Crops of three CC0 texture photographs; data from the left 65 %, held-out from the right 35 %."""
    from skimage import data

    rng = np.random.default_rng(5)
    for name in ("brick", "grass", "gravel"):
        photo = getattr(data, name)().astype(np.float64) / 255.0
        h, w = photo.shape[:2]
        cut = int(0.65 * w)
        for part, n, (lo, hi) in (("data", in_data, (0, cut)), ("heldout", held, (cut, w))):
            for i in range(n):
                side = int(rng.integers(64, min(160, hi - lo) + 1))
                y0, x0 = int(rng.integers(0, h - side + 1)), int(rng.integers(lo, hi - side + 1))
                save(photo[y0 : y0 + side, x0 : x0 + side], root / part / name / f"{name}_{i:04d}.png", size)


# -- generated shapes ---------------------------------------------------------------------------------------
def _polygon(kind: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    """Vertices of a shape of circumradius-like size ``r`` (equal-area where it matters), rotated by ``angle``."""
    if kind == "square":
        half = r * math.sqrt(math.pi) / 2  # the area of the circle of radius r
        pts = [(-half, -half), (half, -half), (half, half), (-half, half)]
    elif kind == "triangle":
        pts = [(r * math.cos(a), r * math.sin(a)) for a in (math.pi / 2 + k * 2 * math.pi / 3 for k in range(3))]
    elif kind == "star":
        radii = [r if k % 2 == 0 else 0.42 * r for k in range(10)]
        pts = [(q * math.cos(math.pi / 2 + k * math.pi / 5), q * math.sin(math.pi / 2 + k * math.pi / 5))
               for k, q in enumerate(radii)]  # fmt: skip
    elif kind == "cross":
        a, b = r, r * 0.32
        pts = [(-b, -a), (b, -a), (b, -b), (a, -b), (a, b), (b, b), (b, a), (-b, a), (-b, b), (-a, b), (-a, -b),
               (-b, -b)]  # fmt: skip
    else:
        raise ValueError(kind)
    c, s = math.cos(angle), math.sin(angle)
    return [((cx + x * c - y * s) * SUPER, (cy + x * s + y * c) * SUPER) for x, y in pts]


def shape_mask(kind: str, cx: float, cy: float, r: float, angle: float, size: int = SIZE) -> np.ndarray:
    """An anti-aliased (size, size) mask in [0, 1] of one shape."""
    from PIL import Image, ImageDraw

    big = Image.new("L", (size * SUPER, size * SUPER), 0)
    draw = ImageDraw.Draw(big)
    box = lambda rr: [(cx - rr) * SUPER, (cy - rr) * SUPER, (cx + rr) * SUPER, (cy + rr) * SUPER]  # noqa: E731
    if kind == "circle":
        draw.ellipse(box(r), fill=255)
    elif kind == "ring":
        draw.ellipse(box(r), fill=255)
        draw.ellipse(box(r * 0.55), fill=0)
    else:
        draw.polygon(_polygon(kind, cx, cy, r, angle), fill=255)
    return np.asarray(big.resize((size, size), Image.Resampling.BOX), np.float64) / 255.0


def _contrasting(rng: np.random.Generator, against: np.ndarray) -> np.ndarray:
    """A random colour at least 0.35 away (RGB distance) from ``against``."""
    while True:
        colour = rng.uniform(0, 1, 3)
        if np.linalg.norm(colour - against) > 0.35:
            return colour


def _plain(rng: np.random.Generator, noise: float) -> np.ndarray:
    return rng.uniform(0, 1, 3) + rng.normal(0, noise, (SIZE, SIZE, 3))


def _clutter(rng: np.random.Generator) -> np.ndarray:
    """A smooth random-colour field (a 4×4 grid of colours, bicubic) with three thin bars of random colours."""
    from PIL import Image, ImageDraw

    grid = (rng.uniform(0.1, 0.9, (4, 4, 3)) * 255).astype(np.uint8)
    field = np.asarray(Image.fromarray(grid).resize((SIZE, SIZE), Image.Resampling.BICUBIC), np.float64) / 255
    for _ in range(3):
        x0, y0 = rng.uniform(0, SIZE, 2)
        length, angle = rng.uniform(12, 30), rng.uniform(0, math.pi)
        big = Image.new("L", (SIZE * SUPER, SIZE * SUPER), 0)
        ImageDraw.Draw(big).line([(x0 * SUPER, y0 * SUPER), ((x0 + length * math.cos(angle)) * SUPER,
                                  (y0 + length * math.sin(angle)) * SUPER)], fill=255, width=2 * SUPER)  # fmt: skip
        bar = np.asarray(big.resize((SIZE, SIZE), Image.Resampling.BOX), np.float64)[..., None] / 255
        field = field * (1 - bar) + bar * rng.uniform(0, 1, 3)
    return field + rng.normal(0, 0.02, (SIZE, SIZE, 3))


def shapes_images(kinds: tuple[str, str], radius: tuple[float, float], background: str, n_per_class: int = PER_CLASS,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(N, SIZE, SIZE, 3) floats and labels: one shape of ``kinds[label]`` per image; every draw but the kind comes
    from one distribution for both classes."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label, kind in enumerate(kinds):
        for _ in range(n_per_class):
            bg = _clutter(rng) if background == "clutter" else _plain(rng, 0.06 if background == "noisy" else 0.02)
            r = rng.uniform(*radius)
            cx, cy = rng.uniform(r + 1, SIZE - r - 1, 2)
            mask = shape_mask(kind, cx, cy, r, rng.uniform(0, 2 * math.pi))[..., None]
            colour = _contrasting(rng, bg[int(cy), int(cx)] if background == "clutter" else bg.mean((0, 1)))
            img = bg * (1 - mask) + mask * (colour + rng.normal(0, 0.02, (SIZE, SIZE, 3)))
            images.append(np.clip(img, 0, 1))
            labels.append(label)
    return np.stack(images), np.asarray(labels)


def write_generated(root: Path, images: np.ndarray, labels: np.ndarray, names: list[str], size: int = SIZE) -> None:
    """The first IN_DATA of each class into data/CLASS (gpukit splits them), the rest into heldout/CLASS."""
    for label, name in enumerate(names):
        idx = np.flatnonzero(labels == label)
        for k, i in enumerate(idx):
            part = "data" if k < IN_DATA else "heldout"
            save(images[i], root / part / name / f"{name}_{k:04d}.png", size)


SHAPES = {  # set name: (kinds, radius range in px, background)
    "shapes-circle-square": (("circle", "square"), (6.0, 20.0), "plain"),
    "shapes-triangle-star": (("triangle", "star"), (8.0, 22.0), "noisy"),
    "shapes-clutter": (("cross", "ring"), (8.0, 18.0), "clutter"),
    "shapes-small": (("square", "triangle"), (4.0, 8.0), "plain"),
}


def build_shapes(root: Path, name: str) -> None:
    kinds, radius, background = SHAPES[name]
    images, labels = shapes_images(kinds, radius, background, seed=sorted(SHAPES).index(name))
    write_generated(root, images, labels, list(kinds))


STRIPES_SIZE = 32


def stripes_images(n_per_class: int, size: int = STRIPES_SIZE, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """``n_per_class`` images of each class, (N, size, size, 3) floats in [0, 1], labels 0 = horizontal stripes
    ("cat"), 1 = vertical ("dog"). Every random draw (background, noise, patch size and place, tints, stripe width
    and phase) comes from the same distribution for both classes; class 1 is built as class 0's pattern transposed."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for label in (0, 1):
        for _ in range(n_per_class):
            img = rng.uniform(0.15, 0.85, 3) + rng.normal(0, 0.04, (size, size, 3))
            w = int(rng.integers(10, 17))  # patch side, px
            y0, x0 = (int(v) for v in rng.integers(0, size - w + 1, 2))  # uniform: a mirror maps x0 -> size-w-x0
            half = int(rng.choice([2, 3]))  # stripe width, px
            phase = int(rng.integers(0, 2 * half))
            dark, light = rng.uniform(0.05, 0.45, 3), rng.uniform(0.55, 0.95, 3)
            if rng.random() < 0.5:
                dark, light = light, dark
            band = ((np.arange(w) + phase) // half) % 2  # one stripe index per row (or column)
            pattern = np.where(band[:, None, None] == 1, light, dark) * np.ones((w, w, 1))  # horizontal stripes
            if label == 1:
                pattern = pattern.transpose(1, 0, 2)
            img[y0 : y0 + w, x0 : x0 + w] = pattern + rng.normal(0, 0.04, (w, w, 3))
            images.append(np.clip(img, 0, 1))
            labels.append(label)
    return np.stack(images), np.asarray(labels)


def orientation_rule(img: np.ndarray) -> int:
    """0 when vertical changes (row to row) outweigh horizontal ones (horizontal stripes), else 1. A left-right
    mirror permutes and negates the horizontal differences and permutes the vertical ones: the sums are unchanged."""
    dy = np.abs(np.diff(img, axis=0)).sum()
    dx = np.abs(np.diff(img, axis=1)).sum()
    return 0 if dy > dx else 1


def check_stripes(images: np.ndarray, labels: np.ndarray) -> dict:
    """The stripes set's own checks: the orientation rule's accuracy (the set's ceiling is ~1), that it gives every
    image and its mirror image the same class, and a mean-colour baseline (nearest class centroid of the per-image
    RGB means, fitted on half the images, scored on the other half), which should sit near chance."""
    rule = np.array([orientation_rule(im) for im in images])
    mirrored = np.array([orientation_rule(im[:, ::-1]) for im in images])
    means = images.mean(axis=(1, 2))
    order = np.random.default_rng(0).permutation(len(images))
    fit, score = order[: len(order) // 2], order[len(order) // 2 :]
    centroids = np.stack([means[fit][labels[fit] == c].mean(axis=0) for c in (0, 1)])
    guess = np.argmin(((means[score][:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    return {
        "images": len(images),
        "orientation_rule_accuracy": float((rule == labels).mean()),
        "mirror_same_class": float((mirrored == rule).mean()),
        "mirror_pixels_differ": float(np.mean([np.abs(im - im[:, ::-1]).mean() > 0.01 for im in images])),
        "mean_colour_baseline_accuracy": float((guess == labels[score]).mean()),
        "class_mean_rgb": [[round(float(v), 4) for v in means[labels == c].mean(axis=0)] for c in (0, 1)],
    }


def build_stripes(root: Path) -> dict:
    images, labels = stripes_images(PER_CLASS)
    checks = check_stripes(images, labels)
    if checks["orientation_rule_accuracy"] < 0.99 or checks["mirror_same_class"] < 1.0:
        raise RuntimeError(f"stripes failed its own checks: {checks}")
    write_generated(root, images, labels, ["cat", "dog"])
    return checks


def _hsv(h: float, sat: float, v: float) -> np.ndarray:
    import colorsys

    return np.asarray(colorsys.hsv_to_rgb(h % 1.0, sat, v))


def _free_spot(rng: np.random.Generator, r: float, taken: list[tuple[float, float, float]]) -> tuple[float, float]:
    """A centre for radius ``r`` inside the image and clear of every circle in ``taken`` by 2 px."""
    for _ in range(1000):
        cx, cy = rng.uniform(r + 1, SIZE - r - 1, 2)
        if all(math.hypot(cx - x, cy - y) > r + q + 2 for x, y, q in taken):
            return float(cx), float(cy)
    raise RuntimeError("no free spot")


def _probe_image(name: str, label: int, rng: np.random.Generator) -> np.ndarray:
    """One image of class ``label`` of probe set ``name`` (module docstring)."""
    bg = np.full((SIZE, SIZE, 3), rng.uniform(0.25, 0.75)) + rng.normal(0, 0.02, (SIZE, SIZE, 3))
    if name == "probe-letters":
        return _letter_image("EFLT"[label], rng)
    if name == "probe-colour":
        hue = rng.uniform(-20, 20) / 360 if label == 0 else rng.uniform(200, 240) / 360
        colour = _hsv(hue, rng.uniform(0.5, 1), rng.uniform(0.5, 1))
        r = rng.uniform(6, 18)
        cx, cy = _free_spot(rng, r, [])
        mask = shape_mask(str(rng.choice(["circle", "square", "triangle"])), cx, cy, r, rng.uniform(0, 2 * math.pi))
    elif name == "probe-count":
        colour = _contrasting(rng, bg.mean((0, 1)))
        taken: list[tuple[float, float, float]] = []
        for _ in range(label + 1):
            r = rng.uniform(4, 9)
            taken.append((*_free_spot(rng, r, taken), r))
        mask = np.clip(sum(shape_mask("circle", x, y, q, 0.0) for x, y, q in taken), 0, 1)
    elif name == "probe-size":
        colour = _contrasting(rng, bg.mean((0, 1)))
        r = rng.uniform(4, 7) if label == 0 else rng.uniform(11, 18)
        cx, cy = _free_spot(rng, r, [])
        kind = str(rng.choice(["circle", "square", "triangle", "star"]))
        mask = shape_mask(kind, cx, cy, r, rng.uniform(0, 2 * math.pi))
    else:
        raise ValueError(name)
    return np.clip(bg * (1 - mask[..., None]) + mask[..., None] * colour, 0, 1)


_STROKES = {  # capitals as strokes in a unit box (x right, y down)
    "E": [((0, 0), (0, 1)), ((0, 0), (0.8, 0)), ((0, 0.5), (0.65, 0.5)), ((0, 1), (0.8, 1))],
    "F": [((0, 0), (0, 1)), ((0, 0), (0.8, 0)), ((0, 0.5), (0.65, 0.5))],
    "L": [((0, 0), (0, 1)), ((0, 1), (0.8, 1))],
    "T": [((0, 0), (0.9, 0)), ((0.45, 0), (0.45, 1))],
}


def _letter_image(letter: str, rng: np.random.Generator) -> np.ndarray:
    from PIL import Image, ImageDraw

    height = rng.uniform(14, 34)
    width, stroke, slant = 0.7 * height, rng.uniform(2, 4), math.radians(rng.uniform(-15, 15))
    x0, y0 = rng.uniform(4, SIZE - width - 4), rng.uniform(4, SIZE - height - 4)
    big = Image.new("L", (SIZE * SUPER, SIZE * SUPER), 0)
    draw = ImageDraw.Draw(big)

    def at(u: float, v: float) -> tuple[float, float]:  # the box point (u, v), slanted about the baseline
        return ((x0 + u * width + (1 - v) * height * math.tan(slant)) * SUPER, (y0 + v * height) * SUPER)

    for a, b in _STROKES[letter]:
        draw.line([at(*a), at(*b)], fill=255, width=round(stroke * SUPER))
    mask = np.asarray(big.resize((SIZE, SIZE), Image.Resampling.BOX), np.float64)[..., None] / 255
    bg = _plain(rng, 0.06)
    return np.clip(bg * (1 - mask) + mask * _contrasting(rng, bg.mean((0, 1))), 0, 1)


PROBES = {"probe-colour": ["red", "blue"], "probe-count": ["one", "two"], "probe-size": ["small", "large"],
          "probe-letters": ["E", "F", "L", "T"]}  # fmt: skip


def build_probe(root: Path, name: str) -> None:
    rng = np.random.default_rng(100 + sorted(PROBES).index(name))
    names = PROBES[name]
    labels = np.repeat(np.arange(len(names)), PER_CLASS)
    images = np.stack([_probe_image(name, int(lab), rng) for lab in labels])
    write_generated(root, images, labels, names)


def builders() -> dict[str, Callable[[Path], dict | None]]:
    """Every set by name → a function that writes it under a root folder (and returns its checks, if any)."""
    out: dict[str, Callable[[Path], dict | None]] = {
        "digits-3v7": lambda r: build_digits(r, [3, 7]),
        "digits-5": lambda r: build_digits(r, [2, 3, 4, 5, 7]),
        "lfw-faces": build_lfw,
        "photo-textures": build_textures,
        "stripes": build_stripes,
    }
    for name in SHAPES:
        out[name] = lambda r, name=name: build_shapes(r, name)
    for name in PROBES:
        out[name] = lambda r, name=name: build_probe(r, name)
    return out
