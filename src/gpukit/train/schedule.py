"""How long to train and at what learning rate: a step budget on top of epochs, warm-up, then a decay.

A small data set gives few steps an epoch (238 images at batch 32: 7), so epochs alone can leave it under-trained
and a constant rate leaves validation jumping between epochs. ``min_steps`` raises the epoch count until the run
takes at least that many optimizer steps; the rate warms up linearly, then decays:

- ``cosine``: warm-up over ``warmup`` of the steps from lr/25, then half a cosine down to lr/100;
- ``one-cycle``: fastai's ``fit_one_cycle`` shape — 25 % warm-up from lr/25, cosine down to lr/25e4;
- ``constant``: the seed's fixed rate (Keras' Adam default).
The rate is a pure function of the global step, so a resumed run sets exactly the rates the uninterrupted one did.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["SCHEDULES", "epochs_for", "lr_at", "lr_table"]

SCHEDULES = ("cosine", "one-cycle", "constant")


def epochs_for(epochs: int, steps_per_epoch: int, min_steps: int) -> int:
    """The epochs to run: as asked, or more when that falls short of ``min_steps`` optimizer steps."""
    return max(epochs, math.ceil(min_steps / max(1, steps_per_epoch)))


def lr_at(step: int, total: int, base: float, schedule: str, warmup: float) -> float:
    """Learning rate of global step ``step`` (0-based) of ``total``."""
    if schedule == "constant":
        return base
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown --schedule {schedule!r}", hint=f"choose one of {', '.join(SCHEDULES)}")
    start, end = (base / 25, base / 25e4) if schedule == "one-cycle" else (base / 25, base / 100)
    frac = 0.25 if schedule == "one-cycle" else warmup
    warm = round(frac * total)
    if step < warm:  # linear warm-up, reaching ``base`` at step ``warm``
        return start + (base - start) * step / warm
    rest = max(1, total - warm - 1)
    t = min(1.0, (step - warm) / rest)
    return end + (base - end) * 0.5 * (1 + math.cos(math.pi * t))


def lr_table(epoch: int, steps: int, total_epochs: int, base: float, schedule: str, warmup: float) -> torch.Tensor:
    """The rates of one epoch's steps, (steps,) float32 on the CPU."""
    import torch

    total = steps * total_epochs
    return torch.tensor([lr_at(epoch * steps + i, total, base, schedule, warmup) for i in range(steps)])
