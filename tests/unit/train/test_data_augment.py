from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gpukit.errors import ConfigError  # noqa: E402
from gpukit.train.augment import AugmentConfig, apply_affine, draw_thetas  # noqa: E402
from gpukit.train.data import decode_paths, load_folder  # noqa: E402


def test_load_folder_skips_and_counts_bad_files(image_folder: Path) -> None:
    data = load_folder(image_folder, image_size=16, val_fraction=0.25, seed=0)
    assert data.classes == ["blue", "red"]
    reasons = {Path(p).name: r for p, r in data.skipped}
    assert set(reasons) == {"corrupt.jpg", "truncated.jpg", "notes.txt"}
    assert reasons["notes.txt"].startswith("not an image")
    assert len(data.train) + len(data.val) == 48
    assert len(data.val) == 12  # 25 % of each class of 24
    assert data.train.images.shape == (36, 3, 16, 16) and data.train.images.dtype == np.uint8
    assert np.bincount(data.val.labels).tolist() == [6, 6]  # the split is per class
    # the red class is red: channel 0 dominates
    red = data.train.images[data.train.labels == 1].astype(float)
    assert red[:, 0].mean() > red[:, 2].mean() + 80


def test_split_is_seeded(image_folder: Path) -> None:
    a = load_folder(image_folder, 16, 0.25, seed=1).val.paths
    b = load_folder(image_folder, 16, 0.25, seed=1).val.paths
    c = load_folder(image_folder, 16, 0.25, seed=2).val.paths
    assert a == b and a != c


def test_train_val_folders_are_used(tmp_path: Path) -> None:
    from train_testdata import make_folder

    make_folder(tmp_path / "d" / "train", per_class=4, junk=False)
    make_folder(tmp_path / "d" / "val", per_class=2, junk=False, seed=3)
    data = load_folder(tmp_path / "d", 16)
    assert (len(data.train), len(data.val)) == (8, 4)


def test_parallel_decode_matches_serial(tmp_path: Path) -> None:
    from train_testdata import make_folder

    root = make_folder(tmp_path / "d", per_class=300, size=8, junk=True)
    paths = sorted(str(p) for p in root.rglob("*") if p.suffix in (".jpg", ".png"))
    images, ok, skipped = decode_paths(paths, 8, workers=2)  # 602 files: worker processes
    assert len(ok) == 600 and [Path(p).name for p, _ in skipped] == ["truncated.jpg", "corrupt.jpg"]
    serial, _ok1, _ = decode_paths(paths[:100], 8, workers=1)
    n = sum(1 for i in ok if i < 100)
    np.testing.assert_array_equal(images[:n], serial)


def test_decode_hook_runs_once_after_the_workers_fork(tmp_path: Path) -> None:
    """``on_started`` comes once the worker processes exist (so a thread started there is never forked), before the
    decode has finished; a train/ + val/ folder is decoded in one pass (one hook call, one fork)."""
    import multiprocessing
    import threading

    from train_testdata import make_folder

    make_folder(tmp_path / "d" / "train", per_class=300, size=8, junk=False)
    make_folder(tmp_path / "d" / "val", per_class=20, size=8, junk=False, seed=3)
    calls: list[tuple[int, int]] = []

    def hook() -> None:
        calls.append((len(multiprocessing.active_children()), threading.active_count()))

    data = load_folder(tmp_path / "d", 8, workers=2, on_started=hook)
    assert (len(data.train), len(data.val)) == (600, 40)
    assert len(calls) == 1 and calls[0][0] == 2  # both workers were running when the hook was called
    assert all("/train/" in p for p in data.train.paths) and all("/val/" in p for p in data.val.paths)
    serial = load_folder(tmp_path / "d", 8, workers=1, on_started=hook)
    assert len(calls) == 2  # an in-process decode calls it too
    np.testing.assert_array_equal(data.val.images, serial.val.images)
    np.testing.assert_array_equal(data.train.images, serial.train.images)


def test_missing_or_single_class_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_folder(tmp_path / "nope")
    (tmp_path / "one" / "a").mkdir(parents=True)
    with pytest.raises(ConfigError):
        load_folder(tmp_path / "one")


def test_identity_theta_returns_the_rescaled_image() -> None:
    x = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    theta = draw_thetas(2, AugmentConfig(enabled=False), torch.Generator().manual_seed(0))
    torch.testing.assert_close(apply_affine(x, theta), x.float() / 255, atol=1e-6, rtol=0)


def test_flip_mirrors_and_parameters_stay_in_keras_ranges() -> None:
    g = torch.Generator().manual_seed(0)
    cfg = AugmentConfig(shear_deg=0.0, zoom=0.0, hflip=True, rotation_deg=0.0, crop=1.0, shift=0.0,
                        geometry_p=1.0)  # the flip alone  # fmt: skip
    theta = draw_thetas(64, cfg, g)
    flipped = theta[:, 0, 0] < 0
    assert 16 < int(flipped.sum()) < 48  # p = 0.5
    x = torch.randint(0, 256, (64, 3, 8, 8), dtype=torch.uint8)
    out = apply_affine(x, theta)
    torch.testing.assert_close(out[flipped], x[flipped].flip(-1).float() / 255, atol=1e-5, rtol=0)
    torch.testing.assert_close(out[~flipped], x[~flipped].float() / 255, atol=1e-5, rtol=0)
    wide = draw_thetas(
        2000,
        AugmentConfig(shear_deg=20.0, zoom=0.2, hflip=False, rotation_deg=0.0, crop=1.0, shift=0.0, geometry_p=1.0),
        g,
    )
    zoom_rows = wide[:, 1, 1]
    assert zoom_rows.min() >= 0.8 and zoom_rows.max() <= 1.2 and zoom_rows.std() > 0.1
    shear = torch.atan2(-wide[:, 1, 0], wide[:, 0, 0])  # theta00 = cos(s)·zc, theta10 = -sin(s)·zc
    assert shear.abs().max() <= math.radians(20) + 1e-6 and shear.abs().max() > math.radians(19)
    zoom_cols = torch.hypot(wide[:, 0, 0], wide[:, 1, 0])
    assert zoom_cols.min() >= 0.8 - 1e-6 and zoom_cols.max() <= 1.2 + 1e-6


def test_a_set_too_big_for_ram_is_refused_before_decoding(image_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    class Tiny:
        available = 1000

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Tiny())
    with pytest.raises(ConfigError, match=r"needs 0\.0 GiB of RAM"):
        load_folder(image_folder, 16)


def test_scan_lists_what_path_rglob_lists_in_path_order(tmp_path: Path) -> None:
    """The scandir walk keeps the old ``sorted(p for p in root.rglob("*") if p.is_file())`` listing exactly
    (the seeded split depends on the order): names that sort differently as strings and as paths, hidden files,
    nested folders, a symlinked file (listed), a symlinked folder (not entered) and a broken link (not listed)."""
    import os

    from gpukit.train.data import scan_images

    root = tmp_path / "cls"
    for rel in (
        "a/x.jpg",
        "a-b/x.jpg",
        "a.b/y.PNG",
        "a/b/c/z.webp",
        ".hidden.jpg",
        "B.jpg",
        "b.jpg",
        "notes.txt",
        "a/readme",
        "ü.jpeg",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "in.jpg").write_bytes(b"x")
    os.symlink(outside / "deep", root / "linked-dir")
    os.symlink(root / "B.jpg", root / "alias.jpg")
    os.symlink(tmp_path / "missing.jpg", root / "broken.jpg")
    expected = [str(p) for p in sorted(p for p in root.rglob("*") if p.is_file())]
    images, others = scan_images(root)
    assert sorted(images + others, key=expected.index) == expected  # the same files, none missing or extra
    assert [p for p in expected if p in images] == images and [p for p in expected if p in others] == others
    assert str(root / "alias.jpg") in images and str(root / "broken.jpg") not in images + others
    assert not any("linked-dir" in p for p in images)
    assert {Path(p).name for p in others} == {"notes.txt", "readme"}
