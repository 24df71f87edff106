"""`gpukit predict`: label and probability per image, batched on the device.

A model is a run folder (its ``best`` checkpoint, else ``last``), a checkpoint's ``.json`` or its
``.safetensors`` (the ``.json`` beside it says the architecture, image size and class names). Two classes follow
the seed's rule: the one logit's sigmoid is P(second class); ≥ 0.5 → the second class (``dog`` in cats/dogs,
folders sort alphabetically), else the first. ``probability`` is that of the label given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpukit.errors import ConfigError
from gpukit.train.data import IMAGE_SUFFIXES, decode_paths, scan_images

if TYPE_CHECKING:
    import torch

__all__ = ["LoadedModel", "Prediction", "load_model", "predict", "resolve_checkpoint"]


@dataclass
class Prediction:
    path: str
    label: str
    probability: float  # of ``label``
    scores: dict[str, float]  # every class's probability

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LoadedModel:
    net: torch.nn.Module
    model: str
    classes: list[str]
    image_size: int
    source: Path


def resolve_checkpoint(path: Path) -> Path:
    """The ``.json`` of the checkpoint a path names; raises ``ConfigError`` when there is none."""
    path = Path(path)
    if path.is_dir():
        for name in ("best.json", "last.json"):
            if (path / name).is_file():
                return path / name
        raise ConfigError(f"{path} holds no best.json or last.json", hint="give a run folder that `gpukit train` wrote")
    if path.suffix == ".safetensors":
        path = path.with_suffix(".json")
    if path.suffix == ".json" and path.is_file():
        return path
    raise ConfigError(f"no model checkpoint at {path}", hint="give a run folder, or a checkpoint's .json/.safetensors")


def load_model(path: Path, device: str = "cpu") -> LoadedModel:
    """Rebuild the network from a checkpoint and load its weights (verified against the recorded hash)."""
    from gpukit.train import checkpoint
    from gpukit.train.ckpt_meta import load_weights, model_meta
    from gpukit.train.models import build_model, small_cnn_layout

    json_path = resolve_checkpoint(path)
    tensors, state = checkpoint.load(json_path)
    meta = model_meta(state, json_path)
    weights = {k.removeprefix("model."): v for k, v in tensors.items() if not k.startswith("optim.")}
    layout = small_cnn_layout(weights) if meta.model == "small-cnn" else None
    net = build_model(meta.model, meta.image_size, len(meta.classes), layout=layout)
    load_weights(net, weights, json_path)
    net.to(device).eval()
    return LoadedModel(net, meta.model, meta.classes, meta.image_size, json_path)


def collect_inputs(inputs: Sequence[Path]) -> list[str]:
    """Image files named directly, and those found (recursively) in named folders."""
    files: list[str] = []
    for item in inputs:
        item = Path(item)
        if item.is_dir():
            files += scan_images(item)[0]
        elif item.is_file():
            files.append(str(item))
        else:
            raise ConfigError(f"{item} does not exist", hint="give image files or folders of images")
    if not files:
        names = ", ".join(str(i) for i in inputs)
        raise ConfigError(f"no files to predict in {names}", hint="give image files or folders that hold images")
    return files


def probabilities(logits: torch.Tensor) -> torch.Tensor:
    """(B, classes) probabilities: sigmoid of one logit → [1-p, p]; softmax otherwise."""
    import torch

    logits = logits.float()
    if logits.shape[1] == 1:
        p = torch.sigmoid(logits)
        return torch.cat([1 - p, p], dim=1)
    return torch.softmax(logits, dim=1)


def predict(
    model_path: Path,
    inputs: Sequence[Path],
    device: str = "auto",
    batch_size: int = 256,
    forward: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[list[Prediction], list[tuple[str, str]]]:
    """Predict every image; returns predictions and the (path, reason) of files that could not be read.
    ``forward``: uint8 (B,3,S,S) → probabilities (B, classes), B ≤ ``batch_size``, instead of the fp32 network
    (`gpukit predict --engine`: a gated engine built by ``gpukit.serve.choose``, on its own device)."""
    import torch

    from gpukit.train.augment import to_float
    from gpukit.train.distributed import resolve_device
    from gpukit.train.evaluate import fp32_math

    if batch_size < 1:
        raise ConfigError("--batch-size must be at least 1")
    dev = resolve_device(device) if forward is None else "cpu"  # with ``forward``: the classes and size only
    loaded = load_model(model_path, dev)
    files = collect_inputs(inputs)
    non_images = [(f, "not an image (by suffix)") for f in files if Path(f).suffix.lower() not in IMAGE_SUFFIXES]
    files = [f for f in files if Path(f).suffix.lower() in IMAGE_SUFFIXES]
    images, ok, skipped = decode_paths(files, loaded.image_size)
    out: list[Prediction] = []
    with torch.no_grad(), fp32_math(torch.device(dev)):  # the arithmetic validation used (evaluate.py)
        for lo in range(0, len(ok), batch_size):
            if forward is not None:
                probs = torch.from_numpy(np.asarray(forward(images[lo : lo + batch_size])))
            else:
                x = to_float(torch.from_numpy(images[lo : lo + batch_size]).to(dev))
                probs = probabilities(loaded.net(x)).cpu()  # one copy back per batch
            for row, i in zip(probs.tolist(), ok[lo : lo + batch_size], strict=True):
                best = max(range(len(row)), key=row.__getitem__)
                if len(row) == 2:  # the seed's rule, ≥ 0.5 → the second class (ties go to it, as in the seed)
                    best = 1 if row[1] >= 0.5 else 0
                scores = dict(zip(loaded.classes, row, strict=True))
                out.append(Prediction(files[i], loaded.classes[best], row[best], scores))
    return out, non_images + skipped


def read_meta(path: Path) -> dict[str, Any]:
    return dict(json.loads(resolve_checkpoint(path).read_text()))
