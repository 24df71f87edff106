"""The recipe's pieces, without training: augmentation knobs and recipes, the schedule, best-epoch selection."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from gpukit.errors import ConfigError  # noqa: E402
from gpukit.train.augment import AugmentConfig, apply_affine, apply_jitter, draw_jitter, draw_thetas, recipe  # noqa: E402
from gpukit.train.config import EpochMetrics  # noqa: E402
from gpukit.train.schedule import epochs_for, lr_at, lr_table  # noqa: E402
from gpukit.train.selection import (  # noqa: E402
    best_epoch,
    should_stop,
    small_val_warning,
    validates,
    validation_every,
)


def _flipped(cfg: AugmentConfig, n: int = 4000) -> float:
    theta = draw_thetas(n, cfg, torch.Generator().manual_seed(0))
    return float((theta[:, 0, 0] < 0).float().mean())


def test_the_flip_is_off_by_default_and_on_in_the_seed_recipe() -> None:
    assert AugmentConfig().hflip is False and recipe("default").hflip is False
    assert recipe("default").rotation_deg == 30 and recipe("seed").rotation_deg == recipe("classic").rotation_deg == 0
    assert _flipped(recipe("default")) == 0.0
    seed = AugmentConfig(shear_deg=0.2, zoom=0.2, hflip=True, rotation_deg=0, colour=0, crop=1, shift=0, contrast=0,
                         saturation=0, geometry_p=1.0)  # fmt: skip
    assert recipe("seed") == seed  # the article's recipe, as written: no crop, shift or jitter
    assert recipe("classic") == AugmentConfig(**{**seed.__dict__, "hflip": False})
    assert 0.47 < _flipped(recipe("seed")) < 0.53
    assert 0.47 < _flipped(recipe("default", hflip=True)) < 0.53
    assert _flipped(recipe("seed", hflip=False)) == 0.0


def test_flip_on_or_off_leaves_the_other_draws_alone() -> None:
    for name in ("seed", "default"):
        on = draw_thetas(64, recipe(name, hflip=True), torch.Generator().manual_seed(3))
        off = draw_thetas(64, recipe(name, hflip=False), torch.Generator().manual_seed(3))
        torch.testing.assert_close(on.abs(), off.abs())


def test_the_crop_and_shift_move_and_scale_the_window_inside_their_ranges() -> None:
    theta = draw_thetas(4000, recipe("none", crop=0.5, shift=0.1), torch.Generator().manual_seed(2))
    w, h = theta[:, 0, 0], theta[:, 1, 1]  # half-widths of the sampled window (no shear or rotation)
    assert theta[:, 0, 1].abs().max() == 0 and theta[:, 1, 0].abs().max() == 0
    area = w * h
    # log-uniform in [crop, 1/crop]: zoomed in as often and as far as out, so object sizes keep their distribution
    assert area.min() >= 0.5 * 0.999 and area.max() <= 2.0 * 1.001 and area.min() < 0.55 and area.max() > 1.8
    assert abs(float(area.log().mean())) < 0.02 and abs(float((area > 1).float().mean()) - 0.5) < 0.03
    assert (w / h).min() >= 0.75 - 1e-4 and (w / h).max() <= 4 / 3 + 1e-4
    # a smaller window stays inside the image and a larger one holds it, give or take the shift (±10 % of the
    # side: ±0.2 in [-1, 1] units)
    assert bool(((theta[:, 0, 2].abs() - (1 - w).abs()) <= 0.2 + 1e-5).all()) and theta[:, 0, 2].abs().max() > 0.3
    # a dot in the middle lands elsewhere: the object moves
    x = torch.zeros(8, 3, 32, 32, dtype=torch.uint8)
    x[:, :, 15:17, 15:17] = 255
    out = apply_affine(x, theta[:8])
    where = torch.stack([(out[i, 0] == out[i, 0].max()).nonzero().float().mean(0) for i in range(8)])
    assert where.std(0).min() > 0.5


def test_the_default_crop_keeps_object_sizes_as_the_data_has_them() -> None:
    """Issue 23: a crop that only zoomed in (80-100 % of the area) showed every object about 12 % larger in area than
    the data holds it, and the smallest objects at test time fell outside what the net trained on. The window's
    area is log-uniform in [crop, 1/crop], so a small square comes out as often smaller as larger, and on average
    its own size."""
    x = torch.zeros(2000, 3, 48, 48, dtype=torch.uint8)
    x[:, :, 20:28, 20:28] = 255  # an 8x8 square in the middle: the shift cannot move it out
    cfg = recipe("default", colour=0.0, contrast=0.0, saturation=0.0, geometry_p=1.0)  # every image cropped
    theta = draw_thetas(len(x), cfg, torch.Generator().manual_seed(4))
    ratio = apply_affine(x, theta)[:, 0].sum((1, 2)) / 64.0  # the square's area out / in
    assert abs(float(ratio.log().mean())) < 0.02
    assert 0.45 < float((ratio > 1).float().mean()) < 0.55
    assert float(ratio.min()) < 0.85 and float(ratio.max()) > 1.15


def test_the_default_resamples_half_the_images_and_passes_the_rest_as_they_are() -> None:
    """Issue 23: resampling at sub-pixel offsets blurs a 4-8 px object's corners, and the images a model is asked
    about are sharp. The default crops and shifts half the images; the other half come out bit for bit (as floats
    in [0, 1]). ``geometry_p`` is drawn after everything else, so the images it keeps get the draws they had."""
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 256, (2000, 3, 16, 16), dtype=torch.uint8, generator=g)
    assert recipe("default").geometry_p == 0.5 and recipe("seed").geometry_p == recipe("classic").geometry_p == 1.0
    theta = draw_thetas(len(x), recipe("default"), torch.Generator().manual_seed(6))
    identity = (theta == torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])).flatten(1).all(1)
    assert 0.46 < float(identity.float().mean()) < 0.54
    out = apply_affine(x, theta)
    torch.testing.assert_close(out[identity], x[identity].float() / 255, atol=1e-6, rtol=0)
    assert bool(((out[~identity] - x[~identity].float() / 255).abs().amax((1, 2, 3)) > 0.05).all())
    every = draw_thetas(len(x), recipe("default", geometry_p=1.0), torch.Generator().manual_seed(6))
    assert torch.equal(theta[~identity], every[~identity])  # the same crops and shifts where they apply
    none = draw_thetas(64, recipe("default", geometry_p=0.0), torch.Generator().manual_seed(6))
    assert torch.equal(none, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(64, 2, 3))
    # the flip is an exact mirror: it stays on the images that are not resampled (half the images mirrored still)
    flips = draw_thetas(4000, recipe("default", hflip=True, geometry_p=0.0), torch.Generator().manual_seed(6))
    assert 0.47 < float((flips[:, 0, 0] < 0).float().mean()) < 0.53
    assert torch.equal(flips[:, 0, 0].abs(), torch.ones(4000)) and not flips[:, :, 2].any()
    with pytest.raises(ConfigError, match=r"--geometry-p must be in \[0, 1\]") as bad:
        recipe("default", geometry_p=1.5)
    assert bad.value.hint == "the default recipe uses --geometry-p 0.5"


def test_rotation_and_colour_knobs() -> None:
    g = torch.Generator().manual_seed(1)
    plain = draw_thetas(2000, recipe("none", rotation_deg=30.0), g)
    angles = torch.atan2(plain[:, 1, 0], plain[:, 0, 0])  # no shear/zoom: a pure rotation
    assert angles.abs().max() <= math.radians(30) + 1e-5 and angles.abs().max() > math.radians(25)
    factors = draw_jitter(2000, recipe("none", colour=0.3, saturation=0.2), g)
    assert 0.7 <= factors[:, 0].min() < 0.75 and 1.25 < factors[:, 0].max() <= 1.3
    assert torch.equal(factors[:, 1], torch.ones(2000)) and 0.8 <= factors[:, 2].min() < 0.85
    assert torch.equal(draw_jitter(5, recipe("none"), g), torch.ones(5, 3)) and not recipe("none").jitters
    x = apply_jitter(torch.full((2, 3, 4, 4), 0.8), torch.tensor([[0.5, 1.0, 1.0], [2.0, 1.0, 1.0]]))
    assert x[0].max() == pytest.approx(0.4) and x[1].min() == 1.0  # brightness, clamped into [0, 1]
    img = torch.rand(1, 3, 8, 8, generator=g)
    grey = apply_jitter(img.clone(), torch.tensor([[1.0, 1.0, 0.0]]))  # saturation 0: every channel the grey
    torch.testing.assert_close(grey[0, 0], grey[0, 2])
    flat = apply_jitter(img.clone(), torch.tensor([[1.0, 0.0, 1.0]]))  # contrast 0: the mean grey everywhere
    assert float(flat.std()) < 1e-6


def test_recipe_errors() -> None:
    with pytest.raises(ConfigError, match="--augment"):
        recipe("keras")
    with pytest.raises(ConfigError, match="--zoom"):
        recipe("default", zoom=1.5)
    with pytest.raises(ConfigError, match="--crop"):
        recipe("default", crop=0.0)
    assert recipe("none").enabled is False and recipe("none", hflip=True).enabled is True
    assert recipe("none", crop=1.0).enabled is False  # a knob at its "off" value turns nothing on


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


def test_short_epochs_are_validated_about_every_30_steps_and_only_validated_ones_rank() -> None:
    assert [validation_every(0, s) for s in (1, 3, 6, 10, 16, 29, 30, 400)] == [30, 10, 5, 3, 2, 2, 1, 1]
    assert validation_every(4, 3) == 4 and validation_every(1, 3) == 1  # --val-every wins
    assert [e for e in range(1, 26) if validates(e, 10, 25)] == [1, 10, 20, 25]  # the first, every 10th, the last
    assert all(validates(e, 1, 5) for e in range(1, 6))
    # an unvalidated epoch's training loss never competes with validation losses
    history = [_m(1, 0.5), _m(2, None, 0.01), _m(3, 0.4), _m(4, None, 0.001)]
    assert best_epoch(history, 1e-3) == 3
    # early stopping decides after a validated epoch only: epoch 4 is 3 past the best, but was not validated
    assert not should_stop(history, 1, 1e-3)
    assert should_stop([*history, _m(5, 0.45)], 2, 1e-3) and not should_stop([*history, _m(5, 0.45)], 3, 1e-3)
