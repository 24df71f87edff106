"""Which epoch is "best", and when to stop early.

"Best" is ranked on validation loss, not accuracy: on a 59-image split one image is 1.7 % of accuracy, and ties
are common; loss moves with every image's confidence. An epoch replaces the best only when its loss is lower by
more than ``min_delta`` — a tie, or a gain inside the noise, keeps the earlier epoch. Without a validation split
the training loss ranks instead. Early stopping (``patience`` > 0) stops after that many epochs in a row without
such an improvement. Both are pure functions of the history, so a resumed run decides as the uninterrupted one.
"""

from __future__ import annotations

from gpukit.train.config import EpochMetrics

__all__ = ["SMALL_VAL", "best_epoch", "score", "should_stop", "small_val_warning"]

SMALL_VAL = 200  # below this many validation images, epochs are hard to rank: warn


def score(m: EpochMetrics) -> float:
    """What ranks epochs (lower is better): validation loss, else training loss."""
    return m.val_loss if m.val_loss is not None else m.train_loss


def best_epoch(history: list[EpochMetrics], min_delta: float) -> int | None:
    """The 1-based epoch ``best`` holds; None for an empty history. A NaN loss never becomes best."""
    best: EpochMetrics | None = None
    for m in history:
        value = score(m)
        if value != value:  # NaN
            continue
        if best is None or value < score(best) - min_delta:
            best = m
    return best.epoch if best is not None else None


def should_stop(history: list[EpochMetrics], patience: int, min_delta: float) -> bool:
    """True when the last ``patience`` epochs brought no improvement over the best (patience 0: never)."""
    if patience <= 0 or not history:
        return False
    best = best_epoch(history, min_delta)
    return best is not None and history[-1].epoch - best >= patience


def small_val_warning(n_val: int) -> str | None:
    if n_val == 0 or n_val >= SMALL_VAL:
        return None
    return (
        f"the validation split has only {n_val} images (one image = {100 / n_val:.1f} % accuracy): too few to "
        f"rank epochs reliably; give a val/ folder or a larger --val-fraction (≥ {SMALL_VAL} images)"
    )
