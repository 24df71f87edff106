from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gpukit.train.config import TrainConfig  # noqa: E402
from gpukit.train.loop import train  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from train_testdata import make_folder

    data = make_folder(tmp_path_factory.mktemp("p") / "data")
    run = data.parent / "run"
    train(
        TrainConfig(
            data=data, out=run, model="seed-cnn", epochs=3, batch_size=8, image_size=16, device="cpu", min_steps=0
        )
    )
    return data, run


def test_predict_json_labels_folders_and_reports_skipped(trained: tuple[Path, Path], run_cli) -> None:
    data, run = trained
    res = run_cli("predict", str(run), str(data / "red"), str(data / "blue" / "blue_001.png"), "--json")
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)
    assert len(rows) == 25 and all({"path", "label", "probability"} <= set(r) for r in rows)
    assert [r["label"] for r in rows[:-1]] == ["red"] * 24 and rows[-1]["label"] == "blue"
    assert all(0.5 <= r["probability"] <= 1 for r in rows)
    assert all(r["scores"]["red"] == pytest.approx(1 - r["scores"]["blue"], abs=1e-6) for r in rows)
    assert "skipped" in res.stderr and "corrupt.jpg" in res.stderr


def test_predict_csv_and_table(trained: tuple[Path, Path], run_cli) -> None:
    data, run = trained
    res = run_cli("predict", str(run / "best.safetensors"), str(data / "blue" / "blue_002.jpg"), "--csv")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.exit_code == 0 and rows[0]["label"] == "blue" and float(rows[0]["probability"]) >= 0.5
    assert "blue" in run_cli("predict", str(run), str(data / "blue" / "blue_002.jpg")).stdout


def test_export_onnx_matches_torch_and_predict(trained: tuple[Path, Path], run_cli, tmp_path: Path) -> None:
    import onnxruntime as ort

    from gpukit.train.data import decode_image

    data, run = trained
    out = tmp_path / "model.onnx"
    res = run_cli("export", str(run), "--onnx", str(out), "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["max_abs_diff"] <= doc["tolerance"] and doc["classes"] == ["blue", "red"]
    image = data / "red" / "red_003.png"
    x = decode_image(str(image), 16)[None].astype(np.float32) / 255
    probs = ort.InferenceSession(str(out)).run(None, {"images": x})[0]
    predicted = json.loads(run_cli("predict", str(run), str(image), "--json").stdout)[0]
    assert probs[0, 1] == pytest.approx(predicted["probability"], abs=1e-5)


def test_export_refuses_unwritable_path_and_keeps_no_unchecked_file(
    trained: tuple[Path, Path], run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpukit.train import export

    _, run = trained
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = run_cli("export", str(run), "--onnx", str(blocker / "m.onnx"))
    assert res.exit_code == 2 and "cannot write" in res.stderr
    monkeypatch.setattr(export, "TOLERANCE", -1.0)  # every export now disagrees with torch
    out = tmp_path / "m.onnx"
    assert run_cli("export", str(run), "--onnx", str(out)).exit_code == 1
    assert list(tmp_path.iterdir()) == [blocker]  # neither the unchecked model nor a temporary file is left


def test_cli_train_json_and_bad_input(
    trained: tuple[Path, Path], run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = trained
    monkeypatch.chdir(tmp_path)  # train without --out makes runs/MODEL-TIME/ here, not in the repository
    res = run_cli("train", str(data), "--model", "seed-cnn", "--epochs", "1", "--batch-size", "8", "--image-size", "16",
                  "--min-steps", "0", "--device", "cpu", "--out", str(tmp_path / "r"), "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["skipped_files"] == 3 and len(doc["epochs"]) == 1 and doc["world_size"] == 1
    assert run_cli("train", str(data), "--model", "nope", "--device", "cpu").exit_code == 2
    assert run_cli("train", str(tmp_path / "missing")).exit_code == 2
    assert run_cli("predict", str(tmp_path), str(data)).exit_code == 2  # no checkpoint there
    for bad in (("--lr", "-1"), ("--lr", "nan"), ("--out", str(tmp_path / "r" / "metrics.csv" / "x"))):
        res = run_cli("train", str(data), "--model", "seed-cnn", "--epochs", "1", "--device", "cpu", *bad)
        assert res.exit_code == 2 and "error:" in res.stderr, (bad, res.stderr)  # not a traceback
    res = run_cli("predict", str(tmp_path / "r"), str(data), "--batch-size", "0", "--device", "cpu")
    assert res.exit_code == 2 and "--batch-size" in res.stderr


def test_train_command_builds_only_its_own_cli_module() -> None:
    """`gpukit train …` must not pay for the bench/serve/plan modules at start-up (they import the measuring engine)."""
    import subprocess
    import sys

    heavy = "('gpukit.bench', 'gpukit.cli.bench', 'gpukit.cli.serve')"
    code = (
        "import sys; from gpukit.cli.app import build_app; app = build_app(['train']); "
        "print(sorted(c.name for c in app.registered_commands), "
        f"any(m.startswith({heavy}) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['export', 'predict', 'train'] False"


@pytest.mark.parametrize("convs", [1, 2])
def test_a_small_cnn_checkpoint_of_an_earlier_layout_still_loads(tmp_path: Path, convs: int) -> None:
    """Checkpoints written before today's small-cnn (24-48-96-192 channels, with one or two convolutions in its
    first stage) load as that network, with their own weights, not as a mismatch."""
    from train_testdata import make_folder

    from gpukit.train import checkpoint
    from gpukit.train.models import small_cnn
    from gpukit.train.predict import load_model

    data = make_folder(tmp_path / "data")
    cfg = TrainConfig(data=data, out=tmp_path / "run", model="small-cnn", epochs=1, batch_size=8, image_size=16,
                      device="cpu", min_steps=0)  # fmt: skip
    train(cfg)
    tensors, state = checkpoint.load(tmp_path / "run" / "best.json")
    torch.manual_seed(3)
    old = small_cnn(2, widths=(24, 48, 96, 192), full_res_convs=convs).eval()
    old_tensors = {f"model.{k}": v for k, v in old.state_dict().items()}
    assert set(old_tensors) != {k for k in tensors if k.startswith("model.")}  # the layouts differ
    body = {k: v for k, v in state.items() if k not in ("tensors_file", "tensors_sha256", "meta_sha256")}
    folder = tmp_path / "old"
    folder.mkdir()
    loaded = load_model(checkpoint.save(folder, "best", old_tensors, body))
    x = torch.rand(4, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(loaded.net(x), old(x))
    assert sum(isinstance(m, torch.nn.Conv2d) for m in loaded.net) == 3 + convs


def test_resuming_a_run_of_an_earlier_small_cnn_says_so_and_changes_nothing(tmp_path: Path) -> None:
    """A run folder written by an earlier gpukit (24-48-96-192 channels) cannot be resumed on today's network: the
    error names both layouts and exits 2 (ConfigError), and the run folder's files are left as they were."""
    from train_testdata import make_folder

    from gpukit.errors import ConfigError
    from gpukit.train import checkpoint
    from gpukit.train.models import small_cnn

    data = make_folder(tmp_path / "data")
    cfg = dict(data=data, out=tmp_path / "run", model="small-cnn", epochs=1, batch_size=8, image_size=16,
               device="cpu", min_steps=0)  # fmt: skip
    train(TrainConfig(**cfg))
    old = {f"model.{k}": v for k, v in small_cnn(2, widths=(24, 48, 96, 192)).state_dict().items()}
    for js in (tmp_path / "run" / "checkpoints").glob("*.json"):  # what an earlier gpukit's run folder holds
        tensors, state = checkpoint.load(js)
        body = {k: v for k, v in state.items() if k not in ("tensors_file", "tensors_sha256", "meta_sha256")}
        checkpoint.save(js.parent, js.stem, {k: v for k, v in tensors.items() if k.startswith("optim.")} | old, body)
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match=r"earlier gpukit \(24-48-96-192 channels, 2 .*16-32-64-128") as err:
        train(TrainConfig(**{**cfg, "epochs": 2, "resume": True}))
    assert "predict, export and serve" in (err.value.hint or "")
    assert {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()} == before
