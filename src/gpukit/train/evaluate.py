"""Validation: loss and accuracy of a split, in fp32 — the same arithmetic ``gpukit predict`` uses.

Training runs under bf16 autocast with TF32 on; validation and prediction both run in plain fp32 with TF32 off,
so the accuracy a run reports is the accuracy its checkpoint gives in ``predict`` (the GPU script checks this on
an H200). The split is a few hundred to a few thousand images: fp32 costs milliseconds here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpukit.train import distributed
from gpukit.train.augment import to_float
from gpukit.train.step import loss_and_hits

if TYPE_CHECKING:
    import torch

    from gpukit.train.data import Split

__all__ = ["Scores", "evaluate", "fp32_math"]


@dataclass(frozen=True)
class Scores:
    loss: float
    accuracy: float


@contextmanager
def fp32_math(device: torch.device) -> Iterator[None]:
    """Full fp32 for matmuls and convolutions on a CUDA device (TF32 off), put back as it was after."""
    import torch

    if device.type != "cuda":
        yield
        return
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def evaluate(
    net: torch.nn.Module,
    split: Split,
    device: torch.device,
    info: distributed.DistInfo,
    channels_last: bool = False,
    mirrored: bool = False,
    chunk: int = 512,
) -> Scores | None:
    """Mean loss and accuracy over ``split`` (all ranks together), optionally mirrored left-right; None if empty."""
    import torch

    if len(split) == 0:
        return None
    was_training = net.training
    net.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=device)
    idx = torch.arange(info.rank, len(split), info.world_size)
    with torch.no_grad(), fp32_math(device):
        for part in idx.split(chunk):
            rows = part.numpy()
            x = to_float(torch.from_numpy(split.images[rows]).to(device))
            if mirrored:
                x = x.flip(3)  # (B,3,S,S): the last axis is the image's width
            y = torch.from_numpy(split.labels[rows]).to(device)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            loss, hits = loss_and_hits(net(x), y)
            sums += torch.stack([loss.double() * len(part), hits.double(), torch.tensor(float(len(part)), device=device,
                                 dtype=torch.float64)])  # fmt: skip
    net.train(was_training)
    distributed.all_reduce_sum(sums, info)
    return Scores(sums[0].item() / sums[2].item(), sums[1].item() / sums[2].item())
