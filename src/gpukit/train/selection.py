"""Which epoch is "best", and when to stop early.

"Best" is ranked on validation loss, not accuracy: on a 59-image split one image is 1.7 % of accuracy, and ties
are common; loss moves with every image's confidence. An epoch replaces the best only when its loss is lower by
more than ``min_delta`` — a tie, or a gain inside the noise, keeps the earlier epoch. Without a validation split
the training loss ranks instead. Early stopping (``patience`` > 0) stops after that many epochs in a row without
such an improvement. Both are pure functions of the history, so a resumed run decides as the uninterrupted one.

Epochs of a few steps are not all validated (:func:`validation_every`): a 120-image set trains 3 steps an epoch and
1,200 epochs, and validating each cost 30-40 s of a 2-core CPU's 5 minutes. Then only the validated epochs are
ranked, and early stopping decides after a validated epoch.

At the end, :func:`generalisation` tells whether anything was learned: a training accuracy that climbs while the
validation accuracy stays at chance (or the validation loss only rises) is memorisation, and the run says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpukit.train.config import EpochMetrics

__all__ = ["GENERALISED", "NOT_CHECKED", "NOT_GENERALISED", "SMALL_VAL", "VAL_MIN_STEPS", "best_epoch",
           "chance_accuracy", "clearly_above_chance", "generalisation", "ranked", "score", "should_stop",
           "small_val_warning", "validates", "validation_every"]  # fmt: skip

SMALL_VAL = 200  # below this many validation images, epochs are hard to rank: warn
VAL_MIN_STEPS = 30  # --val-every 0: validate about every this many steps (each epoch when it has this many)


def validation_every(requested: int, steps: int) -> int:
    """Validate every n-th epoch: ``requested`` when it is set (≥ 1), else (0) enough epochs for
    ``VAL_MIN_STEPS`` steps — 10 for 3-step epochs, 1 for epochs of 30 steps or more."""
    return requested if requested > 0 else max(1, -(-VAL_MIN_STEPS // max(1, steps)))


def validates(epoch: int, every: int, epochs: int) -> bool:
    """Whether the 1-based ``epoch`` of ``epochs`` is validated: the first, every ``every``-th, and the last."""
    return epoch == 1 or epoch == epochs or epoch % every == 0


def ranked(history: list[EpochMetrics]) -> list[EpochMetrics]:
    """The epochs that compete for best: the validated ones, or all of them when none was validated."""
    validated = [m for m in history if m.val_loss is not None]
    return validated or history


def score(m: EpochMetrics) -> float:
    """What ranks epochs (lower is better): validation loss, else training loss."""
    return m.val_loss if m.val_loss is not None else m.train_loss


def best_epoch(history: list[EpochMetrics], min_delta: float) -> int | None:
    """The 1-based epoch ``best`` holds; None for an empty history. A NaN loss never becomes best."""
    best: EpochMetrics | None = None
    for m in ranked(history):
        value = score(m)
        if value != value:  # NaN
            continue
        if best is None or value < score(best) - min_delta:
            best = m
    return best.epoch if best is not None else None


def should_stop(history: list[EpochMetrics], patience: int, min_delta: float) -> bool:
    """True when the last ``patience`` epochs brought no improvement over the best (patience 0: never); decided
    only after an epoch that competes for best (a validated one, when there is validation)."""
    if patience <= 0 or not history or ranked(history)[-1] is not history[-1]:
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


GENERALISED, NOT_GENERALISED, NOT_CHECKED = "generalised", "did not generalise", "not checked: no validation split"
TRAIN_CLIMB = 0.15  # "the training accuracy climbs": it ends this far above chance (or above its first epoch)


def chance_accuracy(labels: Sequence[int]) -> float | None:
    """What always answering the most common validation class scores (None without a validation split)."""
    if len(labels) == 0:
        return None
    counts: dict[int, int] = {}
    for label in labels:
        counts[int(label)] = counts.get(int(label), 0) + 1
    return max(counts.values()) / len(labels)


def clearly_above_chance(accuracy: float | None, chance: float | None, n: int) -> bool:
    """Accuracy more than three binomial standard deviations (and 5 points) above chance on ``n`` images: at
    n = 80 and chance 0.5 that is above 0.668; a model at chance passes this with odds of about 1 in 700."""
    if accuracy is None or chance is None or n == 0:
        return False
    sigma = math.sqrt(chance * (1 - chance) / n)
    return accuracy > chance + max(3 * sigma, 0.05)


def generalisation(history: list[EpochMetrics], chance: float | None, n_val: int) -> tuple[str, str | None]:
    """The verdict on a run and, when nothing was learned, a warning that says what to try.

    "Did not generalise": the validation accuracy never got clearly above chance — whether the training accuracy
    climbed (memorised: it ends ≥ 15 points above chance, or above its first epoch) or not (nothing learned at
    all) — or the training accuracy climbed while the validation loss only rose (the first epoch is the best and
    the last is worse, over ≥ 3 epochs)."""
    scored = [m for m in history if m.val_accuracy is not None and m.val_loss is not None]
    if not scored or chance is None:
        return NOT_CHECKED, None
    first, last = scored[0], scored[-1]
    climbed = last.train_accuracy >= chance + TRAIN_CLIMB or last.train_accuracy >= first.train_accuracy + TRAIN_CLIMB
    top = max(m.val_accuracy for m in scored if m.val_accuracy is not None)
    at_chance = not clearly_above_chance(top, chance, n_val)
    first_loss, last_loss = float(first.val_loss or 0.0), float(last.val_loss or 0.0)
    rising = len(scored) >= 3 and best_epoch(scored, 0.0) == first.epoch and last_loss > first_loss
    val = (
        f"the validation accuracy never rose clearly above chance (best {top:.3f}, chance {chance:.3f}, {n_val} images)"
    )
    if at_chance and not climbed:
        return NOT_GENERALISED, (
            f"did not generalise: nothing was learned — {val}, and the training accuracy ended at "
            f"{last.train_accuracy:.3f}. Try: more steps (--min-steps 7200) or epochs; the default recipe "
            "(--augment default, --model small-cnn, --lr 2e-3) if you changed it; check that each class folder "
            "holds what its name says"
        )
    if not climbed or not (at_chance or rising):
        return GENERALISED, None
    what = (
        val
        if at_chance
        else f"the validation loss only rose after epoch {first.epoch} ({first_loss:.4f} → {last_loss:.4f})"
    )
    return NOT_GENERALISED, (
        f"did not generalise: {what} while the training accuracy reached {last.train_accuracy:.3f} — the model "
        "memorised its training images. Try: more images per class; the default recipe (--augment default, "
        "--model small-cnn) if you changed it; more steps (--min-steps 7200); check that each class folder holds "
        "what its name says"
    )
