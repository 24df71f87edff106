"""``--resume``: the newest good checkpoint of a run folder, read as a typed resume point the loop applies.

``find_resume_point`` is a function of the checkpoint folder and what this run must match; it walks back past
corrupt, partial or edited checkpoints (each one named in the notes) and refuses a checkpoint of other settings.
It touches no model: the loop loads ``model_state`` and ``optimizer_state`` into its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError
from gpukit.train import checkpoint
from gpukit.train.ckpt_meta import model_meta, resume_meta
from gpukit.train.config import EpochMetrics

if TYPE_CHECKING:
    import torch

__all__ = ["ResumePoint", "RunIdentity", "find_resume_point"]


@dataclass(frozen=True)
class RunIdentity:
    """What a resumed run must share with the checkpoint to take the same steps."""

    model: str
    seed: int
    global_batch: int
    image_size: int
    classes: list[str]
    steps_per_epoch: int


@dataclass
class ResumePoint:
    epoch: int  # 0-based epoch to continue
    step: int  # first step to take in it
    carried: tuple[float, int]  # loss sum and hits of that epoch's steps already taken
    history: list[EpochMetrics]
    source: Path  # the checkpoint's .json
    model_state: dict[str, torch.Tensor] = field(repr=False)
    optimizer_state: dict[str, torch.Tensor] = field(repr=False)


def find_resume_point(folder: Path, identity: RunIdentity) -> tuple[ResumePoint | None, list[str]]:
    """The newest good checkpoint in ``folder`` as a resume point (None when there is none), and notes."""
    found = checkpoint.latest_good(folder)
    if found is None:
        return None, ["--resume: no good checkpoint in the run folder; started from scratch"]
    tensors, state, skipped = found
    notes = [f"--resume skipped {reason}" for reason in skipped]
    path = folder / str(state["tensors_file"]).removesuffix(".safetensors")
    path = path.with_suffix(".json")
    meta, point = model_meta(state, path), resume_meta(state, path)
    _check_compatible(identity, {**state, "model": meta.model, "image_size": meta.image_size,
                                 "classes": meta.classes}, point.steps_per_epoch)  # fmt: skip
    model_state = {k.removeprefix("model."): v for k, v in tensors.items() if k.startswith("model.")}
    optim_state = {k: v for k, v in tensors.items() if k.startswith("optim.")}
    return ResumePoint(point.epoch, point.step, point.carried, point.history, path, model_state, optim_state), notes


def _check_compatible(identity: RunIdentity, state: dict[str, Any], steps: int) -> None:
    mine = {"model": identity.model, "seed": identity.seed, "global_batch": identity.global_batch,
            "image_size": identity.image_size, "classes": identity.classes}  # fmt: skip
    for key, value in mine.items():
        if state.get(key) != value:
            raise ConfigError(
                f"cannot resume: the checkpoint has {key}={state.get(key)!r}, this run {key}={value!r}",
                hint="resume with the settings of the original run (see its settings.json)",
            )
    if steps != identity.steps_per_epoch:
        raise ConfigError(
            f"cannot resume: the checkpoint has {steps} steps an epoch, this run {identity.steps_per_epoch}",
            hint="resume on the same data folder as the original run",
        )
