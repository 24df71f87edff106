"""The JSON half of a checkpoint, read as typed values: every field checked, so an edited or foreign checkpoint is
an ``error:`` with a hint (exit 2), never a traceback from deep inside torch.

The hash in the JSON (``checkpoint.meta_hash``) already recognises an edited file; these checks stand behind it for
a file whose hash was recomputed, and they turn a checkpoint that does not match its tensors (another class count,
model or image size) into the same kind of error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError
from gpukit.train.config import EpochMetrics
from gpukit.train.models import MODEL_NAMES

if TYPE_CHECKING:
    import torch

__all__ = ["ModelMeta", "ResumeMeta", "load_weights", "model_meta", "resume_meta"]

_HINT = "the checkpoint must be as `gpukit train` wrote it; retrain, or give another run folder or checkpoint"


@dataclass(frozen=True)
class ModelMeta:
    model: str
    image_size: int
    classes: list[str]


@dataclass(frozen=True)
class ResumeMeta:
    epoch: int  # epochs finished before the saved step
    step: int  # steps done in epoch ``epoch`` (0-based epoch index), 0..steps_per_epoch
    steps_per_epoch: int
    global_batch: int
    seed: int
    carried: tuple[float, int]  # loss sum and hits of the steps done in that epoch
    history: list[EpochMetrics]


def _bad(path: Path, what: str) -> ConfigError:
    return ConfigError(f"checkpoint {path}: {what}", hint=_HINT)


def _int(state: dict[str, Any], key: str, path: Path, low: int = 0) -> int:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(path, f"{key!r} must be a whole number ≥ {low}, not {value!r}")
    return value


def model_meta(state: dict[str, Any], path: Path) -> ModelMeta:
    """Architecture, image size and class names, checked."""
    model = state.get("model")
    if model not in MODEL_NAMES:
        raise _bad(path, f"unknown model {model!r} (gpukit trains {', '.join(MODEL_NAMES)})")
    size = _int(state, "image_size", path, low=4 if model == "seed-cnn" else 16)
    classes = state.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
        raise _bad(path, f"'classes' must be a list of class names, not {classes!r}")
    if len(classes) < 2 or len(set(classes)) != len(classes):
        raise _bad(path, f"'classes' must name at least 2 distinct classes, not {classes!r}")
    return ModelMeta(str(model), size, list(classes))


def _metrics(entry: Any, path: Path) -> EpochMetrics:
    fields = EpochMetrics.__dataclass_fields__
    if not isinstance(entry, dict) or set(entry) != set(fields):
        raise _bad(path, f"a 'history' entry must have the fields {', '.join(fields)}")
    for key, value in entry.items():
        optional = key in ("val_loss", "val_accuracy", "gpu_util_pct", "val_accuracy_mirrored")
        if value is None and optional:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (isinstance(value, float) and not math.isfinite(value) and key != "train_loss"):
            raise _bad(path, f"history field {key!r} must be a number, not {value!r}")
    try:
        return EpochMetrics(**entry)
    except TypeError as exc:  # pragma: no cover - the field check above covers it
        raise _bad(path, f"a bad 'history' entry: {exc}") from exc


def resume_meta(state: dict[str, Any], path: Path) -> ResumeMeta:
    """The resume fields, checked against each other (a step past the end of an epoch is refused)."""
    epoch, step = _int(state, "epoch", path), _int(state, "step", path)
    steps, batch = _int(state, "steps_per_epoch", path, low=1), _int(state, "global_batch", path, low=1)
    seed = _int(state, "seed", path)
    if step > steps:
        raise _bad(path, f"step {step} is past the end of an epoch of {steps} steps")
    carried = state.get("carried", [0.0, 0, 0])
    ok = isinstance(carried, list) and len(carried) >= 2
    ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in carried[:2])
    if not ok:
        raise _bad(path, f"'carried' must be [loss sum, hits, …] of numbers ≥ 0, not {carried!r}")
    history_raw = state.get("history", [])
    if not isinstance(history_raw, list):
        raise _bad(path, "'history' must be a list of epoch metrics")
    history = [_metrics(entry, path) for entry in history_raw]
    if [m.epoch for m in history] != list(range(1, len(history) + 1)) or len(history) != epoch:
        raise _bad(path, f"'history' must hold epochs 1..{epoch}, one entry each")
    return ResumeMeta(epoch, step, steps, batch, seed, (float(carried[0]), int(carried[1])), history)


def load_weights(net: torch.nn.Module, weights: dict[str, torch.Tensor], path: Path) -> None:
    """``load_state_dict`` with a mismatch (another class count, model or image size) as a ``ConfigError``."""
    try:
        net.load_state_dict(weights)
    except (RuntimeError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()
        detail = next((line.strip() for line in first[1:] if line.strip()), first[0] if first else "")
        raise _bad(path, f"its tensors do not fit the model its JSON names ({detail[:200]})") from exc
