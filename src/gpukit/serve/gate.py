"""The accuracy gate: an engine serves only when it answers as the fp32 eager model does.

The same images go through the fp32 eager network (``gpukit predict``'s arithmetic: TF32 off) and through the
engine's own serving path (``ModelRunner.run_items``: padding, CUDA graphs, AMP). The engine passes when

- top-1 agreement (the label each gives, by ``gpukit predict``'s rule) is at least ``TOP1_MIN`` (99.5 %), and
- the largest |probability difference| over every image and class is at most ``PROB_TOL`` (0.02).

0.02 is a stated choice: room for bf16's rounding (8 mantissa bits, about 0.4 % relative per rounding) while an
engine that is wrong, not merely rounded (a wrong layout, a broken fusion), moves probabilities by tenths; what bf16
moves on a real GPU is measured by ``benchmarks/scripts/serve_engine_h200.sh``. The images: those of the folder
given as ``--gate-images``, else the run's own validation split (``gpukit.train.valset``), at most ``MAX_IMAGES``
either way (spread evenly over them), else ``SYNTHETIC`` images of random pixels (a weaker test, said so).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpukit.errors import ConfigError

__all__ = [
    "MAX_IMAGES",
    "PROB_TOL",
    "SYNTHETIC",
    "TOP1_MIN",
    "GateImages",
    "GateResult",
    "engine_probs",
    "gate_images",
    "judge",
    "reference_probs",
    "top1",
]

TOP1_MIN = 0.995
PROB_TOL = 0.02
MAX_IMAGES = 1024  # at most this many images per gate (the share of a larger split, spread evenly)
SYNTHETIC = 256  # random images when no real ones are found


@dataclass(frozen=True)
class GateImages:
    images: np.ndarray  # uint8 (N, 3, S, S)
    source: str  # "validation", "gate-images" or "synthetic"
    detail: str  # where they came from, in words
    digest: str  # identity of the pixels (part of the engine cache's key)


@dataclass(frozen=True)
class GateResult:
    engine: str
    precision: str
    images: int
    source: str
    top1_agreement: float  # share of images given the same label as fp32 eager
    max_abs_dprob: float  # largest |p_engine − p_fp32| over every image and class
    top1_min: float
    prob_tolerance: float
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _spread(paths: list[str], limit: int) -> list[str]:
    if len(paths) <= limit:
        return paths
    return [paths[i] for i in np.linspace(0, len(paths) - 1, limit).round().astype(int)]


def gate_images(checkpoint: Path, size: int, given: Path | None = None, limit: int = MAX_IMAGES) -> GateImages:
    """The gate's images (see the module's docstring); ``checkpoint`` is the checkpoint's ``.json``."""
    from gpukit.train.data import decode_paths
    from gpukit.train.predict import collect_inputs
    from gpukit.train.valset import validation_paths

    if given is not None:
        if not Path(given).is_dir():
            raise ConfigError(f"--gate-images {given} is not a folder", hint="give a folder of images (JPEG, PNG)")
        paths, source, what = collect_inputs([Path(given)]), "gate-images", f"--gate-images {given}"
    else:
        paths, source, what = (
            validation_paths(Path(checkpoint).parent) or [],
            "validation",
            "the run's validation split",
        )
    total = len(paths)
    if paths:  # serial (workers=1): this may run beside a server's threads, where forking is not safe
        images, _, _ = decode_paths(_spread(paths, limit), size, workers=1)
        if len(images):
            detail = f"{len(images)} images of {what}" + (f" ({total} in all)" if total > len(images) else "")
            return GateImages(images, source, detail, _digest(images))
    if given is not None:
        raise ConfigError(f"--gate-images {given} holds no image that decodes", hint="give a folder of JPEG/PNG files")
    images = np.random.default_rng(0).integers(0, 256, (SYNTHETIC, 3, size, size), dtype=np.uint8)
    detail = (f"{SYNTHETIC} synthetic images of random pixels (the run's validation images were not found: give "
              f"--gate-images DIR for a stronger check)")  # fmt: skip
    return GateImages(images, "synthetic", detail, _digest(images))


def _digest(images: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(images).tobytes()).hexdigest()[:20]


def top1(probs: np.ndarray) -> np.ndarray:
    """The label index of each row by ``gpukit predict``'s rule (two classes: ≥ 0.5 → the second)."""
    if probs.shape[1] == 2:
        return (probs[:, 1] >= 0.5).astype(np.int64)
    return np.argmax(probs, axis=1)


def reference_probs(checkpoint: Path, device: str, images: np.ndarray, chunk: int = 256) -> np.ndarray:
    """fp32 eager probabilities of ``images`` on ``device`` (``gpukit predict``'s arithmetic)."""
    import torch

    from gpukit.train.augment import to_float
    from gpukit.train.evaluate import fp32_math
    from gpukit.train.predict import load_model, probabilities

    net = load_model(checkpoint, device).net
    out = []
    with torch.inference_mode(), fp32_math(torch.device(device)):
        for lo in range(0, len(images), chunk):
            x = to_float(torch.from_numpy(images[lo : lo + chunk]).to(device))
            out.append(probabilities(net(x)).cpu().numpy())
    return np.concatenate(out)


def engine_probs(run_items: Callable[[list[Any]], tuple[np.ndarray, Any]], images: np.ndarray, rows: int) -> np.ndarray:
    """The images through a runner's serving path, ``rows`` at a time."""
    return np.concatenate([run_items(list(images[lo : lo + rows]))[0] for lo in range(0, len(images), rows)])


def judge(engine: str, precision: str, got: np.ndarray, want: np.ndarray, source: str) -> GateResult:
    """Compare an engine's probabilities with fp32 eager's; NaN or a shape mismatch fails."""
    if got.shape != want.shape or not np.isfinite(got).all():
        return GateResult(engine, precision, len(want), source, 0.0, float("inf"), TOP1_MIN, PROB_TOL, False)
    agreement = float(np.mean(top1(got) == top1(want)))
    dprob = float(np.max(np.abs(got.astype(np.float64) - want))) if len(want) else 0.0
    passed = agreement >= TOP1_MIN and dprob <= PROB_TOL
    return GateResult(engine, precision, len(want), source, agreement, dprob, TOP1_MIN, PROB_TOL, passed)
