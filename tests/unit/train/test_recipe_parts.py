"""The recipe's pieces, without training: augmentation knobs and recipes, the schedule, best-epoch selection."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from gpukit.errors import ConfigError  # noqa: E402
from gpukit.train.augment import AugmentConfig, apply_gain, draw_gains, draw_thetas, recipe  # noqa: E402
from gpukit.train.config import EpochMetrics  # noqa: E402
from gpukit.train.schedule import epochs_for, lr_at, lr_table  # noqa: E402
from gpukit.train.selection import best_epoch, should_stop, small_val_warning  # noqa: E402


def _flipped(cfg: AugmentConfig, n: int = 4000) -> float:
    theta = draw_thetas(n, cfg, torch.Generator().manual_seed(0))
    return float((theta[:, 0, 0] < 0).float().mean())


def test_the_flip_is_off_by_default_and_on_in_the_seed_recipe() -> None:
    assert AugmentConfig().hflip is False and recipe("default").hflip is False
    assert _flipped(recipe("default")) == 0.0
    assert recipe("seed") == AugmentConfig(shear_deg=0.2, zoom=0.2, hflip=True)  # the article's recipe, as written
    assert 0.47 < _flipped(recipe("seed")) < 0.53
    assert 0.47 < _flipped(recipe("default", hflip=True)) < 0.53
    assert _flipped(recipe("seed", hflip=False)) == 0.0


def test_flip_on_or_off_leaves_the_other_draws_alone() -> None:
    on = draw_thetas(64, recipe("seed"), torch.Generator().manual_seed(3))
    off = draw_thetas(64, recipe("default"), torch.Generator().manual_seed(3))
    torch.testing.assert_close(on.abs(), off.abs())


def test_rotation_and_colour_knobs() -> None:
    g = torch.Generator().manual_seed(1)
    plain = draw_thetas(2000, recipe("none", rotation_deg=30.0), g)
    angles = torch.atan2(plain[:, 1, 0], plain[:, 0, 0])  # no shear/zoom: a pure rotation
    assert angles.abs().max() <= math.radians(30) + 1e-5 and angles.abs().max() > math.radians(25)
    gains = draw_gains(2000, recipe("default", colour=0.3), g)
    assert 0.7 <= gains.min() < 0.75 and 1.25 < gains.max() <= 1.3
    assert torch.equal(draw_gains(5, recipe("default"), g), torch.ones(5))
    x = apply_gain(torch.full((2, 3, 4, 4), 0.8), torch.tensor([0.5, 2.0]))
    assert x[0].max() == pytest.approx(0.4) and x[1].min() == 1.0  # clamped into [0, 1]


def test_recipe_errors() -> None:
    with pytest.raises(ConfigError, match="--augment"):
        recipe("keras")
    with pytest.raises(ConfigError, match="--zoom"):
        recipe("default", zoom=1.5)
    assert recipe("none").enabled is False and recipe("none", hflip=True).enabled is True


def test_step_budget_and_schedule() -> None:
    assert epochs_for(8, 7, 500) == 72 and epochs_for(25, 640, 500) == 25 and epochs_for(3, 5, 0) == 3
    total, base = 1000, 1e-3
    assert lr_at(0, total, base, "cosine", 0.05) == pytest.approx(base / 25)
    assert lr_at(50, total, base, "cosine", 0.05) == pytest.approx(base)  # warm-up ends at 5 %
    assert lr_at(999, total, base, "cosine", 0.05) == pytest.approx(base / 100)
    assert lr_at(525, total, base, "cosine", 0.05) == pytest.approx((base + base / 100) / 2, rel=1e-2)
    assert lr_at(250, total, base, "one-cycle", 0.05) == pytest.approx(base)
    assert lr_at(999, total, base, "one-cycle", 0.05) == pytest.approx(base / 25e4)
    assert lr_at(7, total, base, "constant", 0.05) == base
    rates = torch.cat([lr_table(e, 10, 3, base, "cosine", 0.1) for e in range(3)])
    assert rates.shape == (30,) and int(rates.argmax()) == 3  # round(0.1 × 30)
    assert bool((rates[3:].diff() <= 0).all())  # decays monotonically after the warm-up


def _m(epoch: int, val_loss: float | None, train_loss: float = 0.5) -> EpochMetrics:
    return EpochMetrics(epoch, train_loss, 0.9, val_loss, None if val_loss is None else 0.9, 8, 1.0, 8.0, 0.0, None)


def test_best_is_the_lowest_val_loss_with_ties_to_the_earlier_epoch() -> None:
    history = [_m(1, 0.50), _m(2, 0.30), _m(3, 0.2995), _m(4, 0.31)]
    assert best_epoch(history, 1e-3) == 2  # epoch 3 is better by less than min-delta: a tie, the earlier wins
    assert best_epoch(history, 0.0) == 3
    assert best_epoch([_m(1, 0.4), _m(2, 0.4)], 0.0) == 1
    assert best_epoch([_m(1, float("nan")), _m(2, 0.9)], 0.0) == 2
    assert best_epoch([_m(1, None, 0.7), _m(2, None, 0.2)], 1e-3) == 2  # no validation: train loss ranks
    assert best_epoch([], 0.0) is None


def test_patience_stops_after_epochs_without_a_gain() -> None:
    history = [_m(1, 0.5), _m(2, 0.3), _m(3, 0.31), _m(4, 0.30)]
    assert should_stop(history, 2, 1e-3) and not should_stop(history, 3, 1e-3) and not should_stop(history, 0, 0)
    assert small_val_warning(59) is not None and "1.7 %" in str(small_val_warning(59))
    assert small_val_warning(0) is None and small_val_warning(500) is None
