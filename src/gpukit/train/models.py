"""Model definitions. The seed article's CNN is defined here once; `bench` (cnn-train) and `plan` use it from here.

The seed (Keras): Conv2D(32, 3×3, relu) → MaxPooling2D(2) → Flatten → Dense(128, relu) → Dense(1, sigmoid), on
64×64×3 images, batch 32, Adam, binary cross-entropy. Keras' Conv2D pads "valid", so 64 → 62 → pooled 31.
The networks here return logits; the sigmoid (or softmax) lives in the loss (`BCEWithLogitsLoss`, numerically
safer) and in prediction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is an optional extra: import it only where a model is built
    import torch.nn as nn

__all__ = ["DEFAULT_MODEL", "MODEL_NAMES", "build_model", "seed_cnn", "seed_mlp"]


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
MODEL_NAMES = ("seed-cnn", "resnet18", "resnet34", "resnet50")
DEFAULT_MODEL = "resnet18"


def build_model(name: str, image_size: int = 64, num_classes: int = 2) -> nn.Module:
    """Build a model by its CLI name; raises ``ValueError`` for an unknown one."""
    if name == "seed-cnn":
        return seed_cnn(image_size=image_size, num_classes=num_classes)
    if name in ("resnet18", "resnet34", "resnet50"):
        import torchvision.models as tvm

        factory = getattr(tvm, name)
        return factory(weights=None, num_classes=_outputs(num_classes))  # type: ignore[no-any-return]
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
