"""Edited or foreign checkpoints: `predict`, `export` and `train --resume` answer error + hint, exit 2, never a
traceback; the JSON is covered by the checkpoint's hash; plus the other bad inputs of issue 12."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpukit.errors import ConfigError  # noqa: E402
from gpukit.train import checkpoint  # noqa: E402
from gpukit.train.config import TrainConfig  # noqa: E402
from gpukit.train.loop import train  # noqa: E402

# a checkpoint after every epoch: the tests walk back through them
BASE: dict[str, Any] = dict(model="seed-cnn", epochs=2, batch_size=8, image_size=16, device="cpu", min_steps=0,
                            checkpoint_every_s=0)  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from train_testdata import make_folder

    data = make_folder(tmp_path_factory.mktemp("e") / "data", per_class=12)
    run = data.parent / "run"
    train(TrainConfig(data=data, out=run, **BASE))
    return data, run


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(run, dst)
    return dst


def _edit(path: Path, change: Callable[[Any], Any], rehash: bool) -> None:
    """Apply ``change`` to the JSON; with ``rehash`` the edit also recomputes meta_sha256 (a careful forger)."""
    state = change(json.loads(path.read_text()))
    if rehash and isinstance(state, dict):
        state["meta_sha256"] = checkpoint.meta_hash(state)
    path.write_text(json.dumps(state))


def _set(key: str, value: Any) -> Callable[[Any], Any]:
    return lambda s: {**s, key: value}


MODEL_EDITS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("a list", lambda s: [s], "not an object"),
    ("tensors_file 5", _set("tensors_file", 5), "tensors_file"),
    ("tensors_file outside", _set("tensors_file", "../x.safetensors"), "tensors_file"),
    ("image_size abc", _set("image_size", "abc"), "image_size"),
    ("image_size mismatch", _set("image_size", 32), "do not fit"),
    ("model vgg", _set("model", "vgg"), "unknown model"),
    ("model mismatch", _set("model", "resnet18"), "do not fit"),
    ("classes empty", _set("classes", []), "classes"),
    ("classes three", _set("classes", ["a", "b", "c"]), "do not fit"),
]


@pytest.mark.parametrize(("what", "change", "message"), MODEL_EDITS, ids=[e[0] for e in MODEL_EDITS])
def test_predict_and_export_refuse_an_edited_checkpoint(
    trained: tuple[Path, Path], run_cli, tmp_path: Path, what: str, change: Callable[[Any], Any], message: str
) -> None:
    data, run = trained
    copy = _copy(run, tmp_path)
    for path in (copy / "best.json", copy / "last.json"):
        _edit(path, change, rehash=False)
    res = run_cli("predict", str(copy), str(data / "red"), "--device", "cpu")
    # unhashed: recognised as edited (or, for a list, as not a checkpoint at all)
    assert res.exit_code == 2 and "error:" in res.stderr and "hint:" in res.stderr, res.stderr
    assert "edited" in res.stderr or "not an object" in res.stderr, res.stderr
    for path in (copy / "best.json", copy / "last.json"):
        _edit(path, lambda s: s, rehash=True)  # the same edit, rehashed: the field checks stand behind the hash
    for args in (("predict", str(copy), str(data / "red"), "--device", "cpu"),
                 ("export", str(copy), "--onnx", str(tmp_path / "m.onnx"))):  # fmt: skip
        res = run_cli(*args)
        assert res.exit_code == 2 and "error:" in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)
        assert message in res.stderr.replace("\n", " "), (what, res.stderr)


RESUME_EDITS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("epoch abc", _set("epoch", "abc"), "epoch"),
    ("bad history entry", lambda s: {**s, "history": [{"epoch": 1, "train_loss": "x"}, *s["history"][1:]]}, "history"),
    ("step past the end", _set("step", 10_000), "past the end"),
    ("carried nonsense", _set("carried", "x"), "carried"),
]


@pytest.mark.parametrize(("what", "change", "message"), RESUME_EDITS, ids=[e[0] for e in RESUME_EDITS])
def test_resume_refuses_an_edited_checkpoint(
    trained: tuple[Path, Path], run_cli, tmp_path: Path, what: str, change: Callable[[Any], Any], message: str
) -> None:
    data, run = trained
    copy = _copy(run, tmp_path)
    newest = checkpoint.list_checkpoints(copy / "checkpoints")[0]
    for old in checkpoint.list_checkpoints(copy / "checkpoints")[1:]:
        old.unlink()  # only the edited one is left: resume cannot walk back past it
    _edit(newest, change, rehash=True)
    args = ["train", str(data), "--model", "seed-cnn", "--epochs", "3", "--batch-size", "8", "--image-size", "16",
            "--device", "cpu", "--min-steps", "0", "--checkpoint-every-s", "0", "--out", str(copy),
            "--resume"]  # fmt: skip
    res = run_cli(*args)
    assert res.exit_code == 2 and "error:" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert message in res.stderr.replace("\n", " "), (what, res.stderr)


def test_an_unhashed_edit_is_skipped_by_resume_and_named(trained: tuple[Path, Path], tmp_path: Path) -> None:
    data, run = trained
    copy = _copy(run, tmp_path)
    newest = checkpoint.list_checkpoints(copy / "checkpoints")[0]
    _edit(newest, _set("step", 3), rehash=False)
    result = train(TrainConfig(data=data, out=copy, resume=True, **{**BASE, "epochs": 3}))
    assert any("was edited" in n for n in result.notes), result.notes
    assert result.resumed_from and "e00001" in result.resumed_from  # walked back to epoch 1's checkpoint
    assert all(e.images >= 0 and e.images_per_s >= 0 for e in result.epochs)


def test_load_recognises_an_edit_of_any_field(trained: tuple[Path, Path], tmp_path: Path) -> None:
    _, run = trained
    copy = _copy(run, tmp_path)
    checkpoint.load(copy / "last.json")  # as written: fine
    _edit(copy / "last.json", _set("val_loss", 0.123456), rehash=False)
    with pytest.raises(ConfigError, match="edited"):
        checkpoint.load(copy / "last.json")


def test_other_bad_inputs_are_errors_not_tracebacks(
    trained: tuple[Path, Path], run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, run = trained
    monkeypatch.chdir(tmp_path)  # train without --out makes runs/MODEL-TIME/ here, not in the repository
    res = run_cli("train", str(data), "--seed", "-1", "--device", "cpu")
    assert res.exit_code == 2 and "--seed" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("predict", str(run), str(empty), "--device", "cpu")
    assert res.exit_code == 2 and "no files to predict" in res.stderr.replace("\n", " ")
    image = data / "red" / "red_000.jpg"
    res = run_cli("train", str(image), "--device", "cpu")
    text = res.stderr.replace("\n", " ")
    assert res.exit_code == 2 and "is a file" in text and "wants a folder" in text and "does not exist" not in text
    for bad in (("--augment", "keras"), ("--schedule", "step"), ("--zoom", "2"), ("--patience", "-1")):
        res = run_cli("train", str(data), "--device", "cpu", *bad)
        assert res.exit_code == 2 and "error:" in res.stderr, (bad, res.stderr)
