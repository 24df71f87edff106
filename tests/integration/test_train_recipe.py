"""The default recipe learns a task that is not mirror-symmetric; the seed's recipe (`--augment seed`) flips.

Arrows pointing left vs right, rendered at random positions, sizes and shades: a mirrored left arrow *is* a right
arrow, so a recipe that flips half the training images cannot tell the classes apart, and one that does not flip
learns them. Held-out images (never seen by the run) are scored with `predict` on the run's best checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gpukit.train.augment import recipe  # noqa: E402
from gpukit.train.config import TrainConfig  # noqa: E402
from gpukit.train.loop import train  # noqa: E402
from gpukit.train.predict import predict  # noqa: E402

SIZE = 16


def _arrow(rng: np.random.Generator, left: bool) -> np.ndarray:
    """A grey image with a dark arrow: a horizontal shaft and a triangular head at one end."""
    img = np.full((SIZE, SIZE), rng.uniform(0.7, 1.0))
    cy, length = int(rng.integers(5, SIZE - 5)), int(rng.integers(8, 12))
    x0 = int(rng.integers(1, SIZE - length))
    ink = rng.uniform(0.0, 0.3)
    img[cy, x0 : x0 + length] = ink
    for d in range(4):  # the head: rows cy±d, narrowing away from the tip
        tip = x0 + d if left else x0 + length - 1 - d
        img[max(0, cy - d) : cy + d + 1, tip] = ink
    img += rng.normal(0, 0.03, img.shape)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def _write(root: Path, n: int, seed: int) -> Path:
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name, left in (("left", True), ("right", False)):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(_arrow(rng, left)).convert("RGB").save(root / name / f"{i:03d}.png")
    return root


@pytest.fixture(autouse=True)
def one_thread():  # type: ignore[no-untyped-def]
    """One intra-op thread: on a small shared CPU, torch's spinning OpenMP threads make these tiny steps slower."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def arrows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("arrows")
    return _write(base / "data", 80, seed=0), _write(base / "heldout", 40, seed=1)


def _heldout_accuracy(run: Path, heldout: Path) -> float:
    rows, skipped = predict(run, [heldout], device="cpu")
    assert not skipped and len(rows) == 80
    return sum(Path(r.path).parent.name == r.label for r in rows) / len(rows)


def _train(data: Path, out: Path, augment: str):  # type: ignore[no-untyped-def]
    cfg = TrainConfig(data=data, out=out, model="seed-cnn", epochs=2, batch_size=32, image_size=SIZE,
                      device="cpu", seed=0, min_steps=150, augment=recipe(augment))  # fmt: skip
    return train(cfg)


def test_default_recipe_learns_arrows_and_the_seed_recipe_flips(arrows: tuple[Path, Path], tmp_path: Path) -> None:
    data, heldout = arrows
    default = _train(data, tmp_path / "default", "default")
    assert default.planned_epochs > 2 and len(default.epochs) == default.planned_epochs  # the step budget
    assert default.best_epoch is not None and default.times.train_s > 0
    assert _heldout_accuracy(tmp_path / "default", heldout) >= 0.9
    # trained without the flip, mirrored validation is much worse: the data is not mirror-symmetric
    assert default.val_accuracy_mirrored is not None and default.val_accuracy_mirrored < 0.5
    assert any("not mirror-symmetric" in n for n in default.notes)

    seed = _train(data, tmp_path / "seed", "seed")
    # half the "left" arrows it trained on were right arrows: it cannot learn the task, and says why
    assert _heldout_accuracy(tmp_path / "seed", heldout) <= 0.75
    assert seed.val_accuracy_mirrored is not None
