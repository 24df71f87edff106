"""cnn-train: the seed article's CNN (conv 32 3×3 + ReLU → max-pool 2 → dense 128 + ReLU → dense 1, sigmoid in the
loss) on 64×64×3 images, one Adam step with binary cross-entropy per call, across batch sizes (the seed's is 32).

The model comes from ``gpukit.train.models.seed_cnn`` — defined once there. Step, check and counts: ``_training``.
Forward FLOPs per image at 64×64: conv 2·62²·32·27 = 6.64 M, dense 2·30,752·128 = 7.87 M, output 256 → 14.5 M.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpukit.bench.workloads._training import TrainSpec, make_workload

if TYPE_CHECKING:
    import torch.nn as nn

IMAGE = 64
_POOLED = (IMAGE - 2) // 2
FORWARD_FLOPS = 2 * (IMAGE - 2) ** 2 * 32 * 27 + 2 * 32 * _POOLED**2 * 128 + 2 * 128


def _build() -> nn.Module:
    from gpukit.train.models import seed_cnn

    return seed_cnn(image_size=IMAGE, num_classes=2)


SPEC = TrainSpec(
    name="cnn-train",
    description="one Adam training step of the seed's CNN on 64×64×3 images (fp32 and bf16 autocast)",
    build=_build,
    sample_shape=(3, IMAGE, IMAGE),
    forward_flops=FORWARD_FLOPS,
    ladder=(1, 8, 32, 128, 512),
    quick=(1, 32, 128),
)

WORKLOAD = make_workload(SPEC)
