from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpukit.errors import ConfigError  # noqa: E402
from gpukit.train import checkpoint  # noqa: E402


def _save(folder: Path, epoch: int) -> None:
    tensors = {"model.w": torch.full((3, 2), float(epoch)), "optim.0.step": torch.tensor(float(epoch))}
    checkpoint.save(folder, f"ckpt-e{epoch:05d}-s0000000", tensors, {"epoch": epoch})


def test_round_trip_and_newest_first(tmp_path: Path) -> None:
    for epoch in (1, 2, 10):
        _save(tmp_path, epoch)
    assert next(p.name for p in checkpoint.list_checkpoints(tmp_path)) == "ckpt-e00010-s0000000.json"
    tensors, state, skipped = checkpoint.latest_good(tmp_path)  # type: ignore[misc]
    assert state["epoch"] == 10 and not skipped and torch.equal(tensors["model.w"], torch.full((3, 2), 10.0))


@pytest.mark.parametrize("damage", ["truncate_json", "missing_tensors", "truncate_tensors"])
def test_latest_good_walks_back_past_damage(tmp_path: Path, damage: str) -> None:
    _save(tmp_path, 1)
    _save(tmp_path, 2)
    newest = tmp_path / "ckpt-e00002-s0000000.json"
    if damage == "truncate_json":
        newest.write_text(newest.read_text()[:20])
    elif damage == "missing_tensors":
        newest.with_suffix(".safetensors").unlink()
    else:
        blob = newest.with_suffix(".safetensors").read_bytes()
        newest.with_suffix(".safetensors").write_bytes(blob[:-8])
    _tensors, state, skipped = checkpoint.latest_good(tmp_path)  # type: ignore[misc]
    assert state["epoch"] == 1 and len(skipped) == 1 and "ckpt-e00002" in skipped[0]
    with pytest.raises(ConfigError):
        checkpoint.load(newest)


def test_nothing_good_gives_none(tmp_path: Path) -> None:
    assert checkpoint.latest_good(tmp_path) is None
