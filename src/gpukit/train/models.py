"""Model definitions. The seed article's CNN is defined here once; `bench` (cnn-train) and `plan` use it from here.

The seed (Keras): Conv2D(32, 3×3, relu) → MaxPooling2D(2) → Flatten → Dense(128, relu) → Dense(1, sigmoid), on
64×64×3 images, batch 32, Adam, binary cross-entropy. Keras' Conv2D pads "valid", so 64 → 62 → pooled 31.
``small-cnn`` (the default) is the seed CNN made position-robust for small data sets trained from scratch: four
conv 3×3 + batch-norm + ReLU + max-pool stages (16 → 32 → 64 → 128 channels), the first with two convolutions at
full resolution (a 5×5 view of the pixels before anything is pooled away: the corners of a 4–8 px object survive),
then *global* average and max pooling (the features no longer depend on where the object is, and the head has 257
weights instead of 3.9 M), dropout and one linear layer. The networks here return logits; the sigmoid (or softmax)
lives in the loss (`BCEWithLogitsLoss`, numerically safer) and in prediction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is an optional extra: import it only where a model is built
    import torch.nn as nn

__all__ = ["DEFAULT_MODEL", "MODEL_NAMES", "build_model", "seed_cnn", "seed_mlp", "small_cnn", "small_cnn_layout"]

# 16 wide at full resolution, doubling each stage: widths that are multiples of 16 suit the CPU's convolution kernels
# (a training step at batch 32 on 2 cores: 54-62 ms, against 137-180 ms for the 24-48-96-192 of before, which has
# 2.2x the FLOPs), so the step budget that small objects need fits the CPU's time
# (benchmarks/train-recipe-screen_h200_2026-12-03.md; the recipe's table: train-recipe_*_2026-12-03-run5.md)
SMALL_CNN_WIDTHS = (16, 32, 64, 128)
SMALL_CNN_FULL_RES_CONVS = 2  # convolutions before the first pool; 1 was the first small-cnn (issue 23)
SMALL_CNN_LAYOUT = (SMALL_CNN_WIDTHS, SMALL_CNN_FULL_RES_CONVS)  # what build_model makes, small_cnn_layout reads


def _outputs(num_classes: int) -> int:
    """Two classes use one sigmoid logit (the seed's rule: ≥ 0.5 → class 1); more use one logit per class."""
    if num_classes < 2:
        raise ValueError(f"num_classes must be at least 2, got {num_classes}")
    return 1 if num_classes == 2 else num_classes


def seed_cnn(image_size: int = 64, num_classes: int = 2) -> nn.Module:
    """The seed article's CNN: conv32 3×3 + ReLU → maxpool 2 → flatten → dense 128 + ReLU → dense out."""
    import torch.nn as nn

    if image_size < 4:
        raise ValueError(f"image_size must be at least 4, got {image_size}")
    pooled = (image_size - 2) // 2  # valid 3×3 conv, then 2×2 pool (floor, as Keras)
    return nn.Sequential(
        nn.Conv2d(3, 32, kernel_size=3),  # (N,3,S,S) → (N,32,S-2,S-2)
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),  # → (N,32,P,P), P = (S-2)//2
        nn.Flatten(),  # → (N, 32·P·P); 30,752 features at S=64
        nn.Linear(32 * pooled * pooled, 128),
        nn.ReLU(inplace=True),
        nn.Linear(128, _outputs(num_classes)),
    )


def small_cnn(num_classes: int = 2, widths: tuple[int, ...] = SMALL_CNN_WIDTHS, dropout: float = 0.2,
              full_res_convs: int = SMALL_CNN_FULL_RES_CONVS) -> nn.Module:  # fmt: skip
    """The default network: conv-BN-ReLU-maxpool stages (the first with ``full_res_convs`` convolutions, the others
    with one), global average + max pooling, dropout, one linear layer. Any image size of at least 2**len(widths)
    works (the pooling is global)."""
    import torch
    import torch.nn as nn

    class GlobalPool(nn.Module):
        """(N,C,H,W) → (N,2C): the mean and the maximum of every channel over all positions."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([x.mean((2, 3)), x.amax((2, 3))], 1)

    layers: list[nn.Module] = []
    width = 3
    if full_res_convs < 1:
        raise ValueError(f"full_res_convs must be at least 1, got {full_res_convs}")
    for stage, out in enumerate(widths):
        for _ in range(full_res_convs if stage == 0 else 1):
            layers += [nn.Conv2d(width, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            width = out
        layers.append(nn.MaxPool2d(2))
    layers += [GlobalPool(), nn.Flatten(), nn.Dropout(dropout), nn.Linear(2 * width, _outputs(num_classes))]
    return nn.Sequential(*layers)


def seed_mlp(in_features: int = 64, hidden: int = 64, num_classes: int = 2, layers: int = 2) -> nn.Module:
    """A small fully connected network — the second article's "small ANN" that trains faster on a CPU."""
    import torch.nn as nn

    blocks: list[nn.Module] = []
    width = in_features
    for _ in range(layers):
        blocks += [nn.Linear(width, hidden), nn.ReLU(inplace=True)]
        width = hidden
    blocks.append(nn.Linear(width, _outputs(num_classes)))
    return nn.Sequential(*blocks)


# Architectures `gpukit train --model` accepts. The ResNets are torchvision's, randomly initialised; pretrained
# weights come only from a local file (`--weights`), never from the network.
MODEL_NAMES = ("small-cnn", "seed-cnn", "resnet18", "resnet34", "resnet50")
DEFAULT_MODEL = "small-cnn"


def small_cnn_layout(weights: Mapping[str, Any]) -> tuple[tuple[int, ...], int]:
    """``(widths, full_res_convs)`` of a small-cnn's weights, read off its convolutions in layer order: checkpoints
    written before today's layout (one full-resolution convolution, or the 24-48-96-192 widths) still load."""
    convs = sorted((int(k.split(".")[0]), v.shape[0]) for k, v in weights.items()
                   if getattr(v, "ndim", 0) == 4 and k.split(".")[0].isdigit())  # fmt: skip
    outs = [width for _, width in convs]
    if not outs:
        return SMALL_CNN_LAYOUT
    widths = tuple(dict.fromkeys(outs))
    return widths, outs.count(widths[0])


def build_model(name: str, image_size: int = 64, num_classes: int = 2,
                layout: tuple[tuple[int, ...], int] | None = None) -> nn.Module:  # fmt: skip
    """Build a model by its CLI name; raises ``ValueError`` for an unknown one. ``layout``: small-cnn's widths and
    full-resolution convolutions (default: today's; :func:`small_cnn_layout` reads a checkpoint's)."""
    if name == "seed-cnn":
        return seed_cnn(image_size=image_size, num_classes=num_classes)
    if name == "small-cnn":
        widths, full_res_convs = layout or SMALL_CNN_LAYOUT
        if image_size < 2 ** len(widths):
            raise ValueError(f"small-cnn needs an image size of at least {2 ** len(widths)}, got {image_size}")
        return small_cnn(num_classes=num_classes, widths=widths, full_res_convs=full_res_convs)
    if name in ("resnet18", "resnet34", "resnet50"):
        import torchvision.models as tvm

        factory = getattr(tvm, name)
        return factory(weights=None, num_classes=_outputs(num_classes))  # type: ignore[no-any-return]
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
