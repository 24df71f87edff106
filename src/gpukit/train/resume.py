"""``--resume``: continue a run from its newest good checkpoint, walking back past corrupt ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError
from gpukit.train import checkpoint
from gpukit.train.config import EpochMetrics

if TYPE_CHECKING:
    from gpukit.train.loop import _Run

__all__ = ["resume_state"]


def resume_state(run: _Run) -> tuple[int, int, tuple[float, int, int], list[EpochMetrics], str | None]:
    """Load the newest good checkpoint into the run's model and optimizer.

    Returns (start epoch, start step, loss/hit sums carried into that epoch, earlier epochs' metrics, the
    checkpoint used). Every rank reads the same file, so all ranks resume identically.
    """
    fresh: tuple[int, int, tuple[float, int, int], list[EpochMetrics], str | None] = (0, 0, (0.0, 0, 0), [], None)
    if not run.cfg.resume:
        return fresh
    found = checkpoint.latest_good(run.run_dir / "checkpoints")
    if found is None:
        run.notes.append("--resume: no good checkpoint in the run folder; started from scratch")
        return fresh
    tensors, state, skipped = found
    run.notes += [f"--resume skipped {reason}" for reason in skipped]
    _check_compatible(run, state)
    model_state = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    run.net.load_state_dict(model_state)
    checkpoint.restore_optimizer(run.optimizer, {k: v for k, v in tensors.items() if k.startswith("optim.")})
    carried: Any = state.get("carried", [0.0, 0, 0])
    history = [EpochMetrics(**m) for m in state.get("history", [])]
    name = str(run.run_dir / "checkpoints" / state["tensors_file"])
    return int(state["epoch"]), int(state["step"]), (float(carried[0]), int(carried[1]), 0), history, name


def _check_compatible(run: _Run, state: dict[str, Any]) -> None:
    """A resumed run must take the same steps: same model, seed, global batch and classes."""
    mine = {"model": run.cfg.model, "seed": run.cfg.seed, "global_batch": run.global_batch,
            "image_size": run.cfg.image_size, "classes": run.data.classes}  # fmt: skip
    for key, value in mine.items():
        if state.get(key) != value:
            raise ConfigError(
                f"cannot resume: the checkpoint has {key}={state.get(key)!r}, this run {key}={value!r}",
                hint="resume with the settings of the original run (see its settings.json)",
            )
