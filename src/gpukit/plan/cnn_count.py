"""A CNN preset at another input resolution: parameters, activation elements and FLOPs counted from the real module.

The presets' constants (``models.CNN_PRESETS``) are counted at their own resolution (224 for ResNet-50, 64 for the
seed CNN) and pinned by a test. ``--image-size`` recounts them from the torch module itself, built on the ``meta``
device (shapes only: no memory, no arithmetic, well under a second), with forward hooks on its leaf modules — the
same rule the presets were counted by: every leaf output is kept for backward except in-place ReLUs and views, and
a max-pool keeps its int64 indices too (3 elements' worth per output; memory.py prices the indices at 8 bytes in
every precision from ``pool_index_elems``). FLOPs are 2 × the multiply-adds of the convs
and linear layers. The seed CNN's dense layer grows with the image, so its parameter count changes too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpukit.errors import BackendUnavailable, PlanError
from gpukit.plan.models import CnnSpec, ModelSpec

__all__ = ["IMAGE_SIZE_RANGE", "at_image_size", "count_cnn"]

# ResNet-50 needs 32 pixels to reach its 1×1 stage; above 1,024 per side one image's activations alone pass 10 GiB.
IMAGE_SIZE_RANGE = (32, 1024)


def _module(spec: CnnSpec, image_size: int) -> Any:
    if spec.builder == "torchvision:resnet50":
        import torchvision

        return torchvision.models.resnet50(num_classes=spec.num_classes)
    if spec.builder == "gpukit:seed_cnn":
        from gpukit.train.models import seed_cnn

        return seed_cnn(image_size, spec.num_classes)
    raise PlanError(f"--image-size needs a CNN preset, and '{spec.name}' is not one", hint="use resnet50 or seed-cnn")


def count_cnn(spec: CnnSpec, image_size: int) -> tuple[int, int, int, int]:
    """(parameters, activation elements kept per sample, forward FLOPs per sample, max-pool outputs per sample) of
    the real module."""
    try:
        import torch
        import torch.nn as nn
    except ImportError as exc:
        raise BackendUnavailable(
            "--image-size counts the CNN from its torch module, and PyTorch is not installed",
            hint="pip install 'gpukit[torch]'",
        ) from exc
    with torch.device("meta"):
        module = _module(spec, image_size)
    acts, flops, pooled = [0], [0], [0]

    def hook(mod: nn.Module, inp: tuple[Any, ...], out: Any) -> None:
        if isinstance(mod, nn.Conv2d):
            k = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
            flops[0] += 2 * out.numel() * k
        elif isinstance(mod, nn.Linear):
            flops[0] += 2 * out.numel() * mod.in_features
        if isinstance(mod, nn.ReLU | nn.Flatten | nn.Identity | nn.Dropout):
            return  # in-place or views: no new storage
        acts[0] += out.numel() * (3 if isinstance(mod, nn.MaxPool2d) else 1)
        pooled[0] += out.numel() if isinstance(mod, nn.MaxPool2d) else 0

    handles = [m.register_forward_hook(hook) for m in module.modules() if not list(m.children())]
    x = torch.zeros(1, 3, image_size, image_size, device="meta")
    with torch.no_grad():
        module(x)
    for h in handles:
        h.remove()
    return sum(p.numel() for p in module.parameters()), acts[0] + x.numel(), flops[0], pooled[0]


def at_image_size(spec: ModelSpec, image_size: int) -> CnnSpec:
    """``spec`` recounted at ``image_size`` pixels per side (PlanError for a transformer or a size out of range)."""
    if not isinstance(spec, CnnSpec) or spec.family != "cnn":
        raise PlanError(
            "--image-size applies to CNN presets (resnet50, seed-cnn)",
            hint="a transformer's input is --seq tokens; a bare --params count has no input",
        )
    lo, hi = IMAGE_SIZE_RANGE
    if not lo <= image_size <= hi:
        raise PlanError(
            f"--image-size {image_size} is outside {lo}–{hi} pixels",
            hint="ImageNet-style training uses 128–512 pixels per side",
        )
    if image_size == spec.image_size:
        return spec
    params, acts, flops, pooled = count_cnn(spec, image_size)
    return dataclasses.replace(
        spec,
        params=params,
        image_size=image_size,
        act_elems_per_sample=acts,
        flops_per_sample=flops,
        pool_index_elems=pooled,
    )
