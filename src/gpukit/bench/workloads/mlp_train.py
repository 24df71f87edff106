"""mlp-train: a small fully connected network (64 → 64 → 64 → 1, ReLU) — the second article's "small ANN" that
trained 1.2× faster on a CPU — one Adam step with binary cross-entropy per call, across batch sizes.

The model comes from ``gpukit.train.models.seed_mlp`` — defined once there. Step, check and counts: ``_training``.
Its ladder reaches far larger batches than the CNN's: a network this small only keeps a GPU busy when the batch is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpukit.bench.workloads._training import TrainSpec, make_workload

if TYPE_CHECKING:
    import torch.nn as nn

FEATURES = 64
HIDDEN = 64
LAYERS = 2
FORWARD_FLOPS = 2 * (FEATURES * HIDDEN + (LAYERS - 1) * HIDDEN * HIDDEN + HIDDEN)


def _build() -> nn.Module:
    from gpukit.train.models import seed_mlp

    return seed_mlp(in_features=FEATURES, hidden=HIDDEN, num_classes=2, layers=LAYERS)


SPEC = TrainSpec(
    name="mlp-train",
    description="one Adam training step of a small MLP (64-64-64-1) (fp32 and bf16 autocast)",
    build=_build,
    sample_shape=(FEATURES,),
    forward_flops=FORWARD_FLOPS,
    ladder=(1, 8, 32, 128, 512, 2048, 8192, 32768),
    quick=(1, 32, 1024),
)

WORKLOAD = make_workload(SPEC)
