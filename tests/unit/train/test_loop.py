from __future__ import annotations

import csv
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpukit.errors import ConfigError  # noqa: E402
from gpukit.train import checkpoint  # noqa: E402
from gpukit.train.config import TrainConfig  # noqa: E402
from gpukit.train.loop import epoch_plan, train  # noqa: E402


def _cfg(data: Path, out: Path, **kw: Any) -> TrainConfig:
    # a checkpoint after every epoch (these tests count and walk them); the default's throttle is tested below
    base: dict[str, Any] = dict(
        model="seed-cnn",
        epochs=3,
        batch_size=8,
        image_size=16,
        device="cpu",
        seed=7,
        min_steps=0,
        checkpoint_every_s=0,
    )
    return TrainConfig(data=data, out=out, **{**base, **kw})


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return checkpoint.load(run / "last.json")[0]


def _assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=0)


def test_trains_to_high_accuracy_and_writes_the_run_folder(image_folder: Path, tmp_path: Path) -> None:
    result = train(_cfg(image_folder, tmp_path / "run"))
    assert result.skipped_files == 3 and result.train_images + result.val_images == 48
    assert result.epochs[-1].val_accuracy == 1.0
    assert result.epochs[-1].train_loss < result.epochs[0].train_loss
    t = result.times  # the wall-time split adds up: every part is measured, and "other" is what is left
    assert t.decode_s > 0 and t.setup_s > 0 and t.train_s > 0 and t.validate_s > 0 and t.save_s > 0
    assert t.imports_s >= 0 and t.startup_s is not None and t.startup_s >= 0
    parts = t.decode_s + t.imports_s + t.setup_s + t.train_s + t.validate_s + t.save_s + t.startup_s
    assert t.total_s >= parts - 1e-6 and abs(t.other_s - (t.total_s - parts - t.capture_s)) < 1e-6
    assert result.best_epoch in (1, 2, 3) and result.val_accuracy_mirrored is not None
    run = tmp_path / "run"
    for name in ("settings.json", "metrics.csv", "curve.svg", "summary.json", "best.json", "last.safetensors"):
        assert (run / name).is_file(), name
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3] and float(rows[0]["images_per_s"]) > 0
    assert json.loads((run / "summary.json").read_text())["best_val_accuracy"] == 1.0
    assert (run / "curve.svg").read_text().startswith("<svg") and (run / "curve.svg").read_text().count(
        "<polyline"
    ) == 4
    assert len(checkpoint.list_checkpoints(run / "checkpoints")) == 3
    log = (run / "train.log").read_text().splitlines()
    epochs = [line for line in log if line.startswith("epoch ")]
    assert len(epochs) == 3 and "img/s" in epochs[0] and "data wait" in epochs[0] and "GPU n/a" in epochs[0]
    # the skipped files are named, in the log and in skipped.txt, not only counted
    named = sorted(Path(line.split("\t")[0]).name for line in (run / "skipped.txt").read_text().splitlines())
    assert named == ["corrupt.jpg", "notes.txt", "truncated.jpg"]
    assert sum(line.startswith("skipped ") and "corrupt.jpg" in line for line in log) == 1
    assert sorted(Path(p).name for p, _reason in result.skipped) == named


def test_three_classes_use_softmax_and_predict_reports_every_class(tmp_path: Path) -> None:
    from train_testdata import make_folder

    from gpukit.train.predict import predict

    data = make_folder(tmp_path / "d", per_class=16, junk=False, three=True)
    result = train(_cfg(data, tmp_path / "run", epochs=4))
    assert result.classes == ["blue", "green", "red"] and result.epochs[-1].val_accuracy >= 0.9
    rows, skipped = predict(tmp_path / "run", [data / "green"], device="cpu")
    assert not skipped and len(rows) == 16 and set(rows[0].scores) == {"blue", "green", "red"}
    assert sum(r.label == "green" for r in rows) >= 14
    assert sum(rows[0].scores.values()) == pytest.approx(1.0, abs=1e-5)


def test_same_seed_same_weights_other_seed_differs(image_folder: Path, tmp_path: Path) -> None:
    train(_cfg(image_folder, tmp_path / "a", epochs=1))
    train(_cfg(image_folder, tmp_path / "b", epochs=1))
    train(_cfg(image_folder, tmp_path / "c", epochs=1, seed=8))
    _assert_same(_weights(tmp_path / "a"), _weights(tmp_path / "b"))
    assert not torch.equal(_weights(tmp_path / "a")["0.weight"], _weights(tmp_path / "c")["0.weight"])


def test_sigterm_mid_epoch_saves_and_resume_ends_like_an_uninterrupted_run(image_folder: Path, tmp_path: Path) -> None:
    train(_cfg(image_folder, tmp_path / "whole"))

    def stop_in_epoch_2(event: dict[str, Any]) -> None:
        if event["kind"] == "step" and event["epoch"] == 2 and event["step"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler only sets a flag; the loop saves and returns

    cut = train(_cfg(image_folder, tmp_path / "cut", log_every=1), on_event=stop_in_epoch_2)
    assert cut.interrupted and len(cut.epochs) == 1
    newest = checkpoint.list_checkpoints(tmp_path / "cut" / "checkpoints")[0]
    assert newest.name == "ckpt-e00001-s0000002.json"
    resumed = train(_cfg(image_folder, tmp_path / "cut", resume=True))
    assert not resumed.interrupted and resumed.resumed_from and [e.epoch for e in resumed.epochs] == [1, 2, 3]
    _assert_same(_weights(tmp_path / "whole"), _weights(tmp_path / "cut"))
    whole = json.loads((tmp_path / "whole" / "summary.json").read_text())["epochs"]
    assert resumed.epochs[1].train_loss == pytest.approx(whole[1]["train_loss"], rel=1e-6)  # fp32 sums split in two


def test_resume_falls_back_past_a_corrupt_checkpoint(image_folder: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(_cfg(image_folder, run))
    before = _weights(run)
    newest = checkpoint.list_checkpoints(run / "checkpoints")[0]
    blob = bytearray(newest.with_suffix(".safetensors").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    newest.with_suffix(".safetensors").write_bytes(bytes(blob))
    resumed = train(_cfg(image_folder, run, resume=True))
    assert any("does not match" in n for n in resumed.notes)
    assert resumed.resumed_from and "e00002" in resumed.resumed_from  # it redid epoch 3 from epoch 2's state
    _assert_same(before, _weights(run))


def test_resume_refuses_other_settings(image_folder: Path, tmp_path: Path) -> None:
    train(_cfg(image_folder, tmp_path / "run", epochs=1))
    settings = (tmp_path / "run" / "settings.json").read_bytes()
    with pytest.raises(ConfigError, match="global_batch") as err:
        train(_cfg(image_folder, tmp_path / "run", resume=True, batch_size=4))
    # the hint points at settings.json: it still holds the original run's settings, not the refused ones
    assert "settings.json" in (err.value.hint or "")
    assert (tmp_path / "run" / "settings.json").read_bytes() == settings


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    checkpoint.atomic_write_bytes(tmp_path / "f.bin", b"one")
    checkpoint.atomic_write_bytes(tmp_path / "f.bin", b"two")
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"] and (tmp_path / "f.bin").read_bytes() == b"two"


def test_atomic_write_gives_the_permissions_open_would(tmp_path: Path) -> None:
    """Not mkstemp's 0o600: a report or checkpoint others should read gets 0o666 less the umask; a file that
    exists keeps its own mode."""
    import os

    old = os.umask(0o022)
    try:
        checkpoint.atomic_write_bytes(tmp_path / "new.html", b"x")
        assert (tmp_path / "new.html").stat().st_mode & 0o777 == 0o644
        kept = tmp_path / "kept.json"
        kept.write_bytes(b"{}")
        kept.chmod(0o640)
        checkpoint.atomic_write_bytes(kept, b"[]")
        assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_bytes() == b"[]"
    finally:
        os.umask(old)


def test_epoch_plan_is_a_seeded_permutation() -> None:
    from gpukit.train.augment import AugmentConfig

    perm, theta, _ = epoch_plan(1, 0, 50, 6, 8, AugmentConfig())
    assert perm.shape == (6, 8) and theta.shape == (6, 8, 2, 3) and len(set(perm.flatten().tolist())) == 48
    again, _, _ = epoch_plan(1, 0, 50, 6, 8, AugmentConfig())
    other, _, _ = epoch_plan(1, 1, 50, 6, 8, AugmentConfig())
    assert torch.equal(perm, again) and not torch.equal(perm, other)


def test_bad_settings_are_config_errors(image_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        train(_cfg(image_folder, tmp_path / "r", model="vgg"))
    with pytest.raises(ConfigError):
        train(_cfg(image_folder, None, resume=True))  # type: ignore[arg-type]


def test_pretrained_weights_from_a_local_file_keep_all_but_the_head(tmp_path: Path) -> None:
    from train_testdata import make_folder

    two = make_folder(tmp_path / "two", per_class=8, junk=False)
    three = make_folder(tmp_path / "three", per_class=8, junk=False, three=True)
    train(_cfg(two, tmp_path / "a", epochs=1))
    result = train(_cfg(three, tmp_path / "b", epochs=1, weights=tmp_path / "a" / "last.safetensors"))
    assert any("loaded 4 of 6 tensors" in n for n in result.notes)  # conv + dense 128 kept; the head is new
    with pytest.raises(ConfigError, match="does not exist"):
        train(_cfg(two, tmp_path / "c", weights=tmp_path / "nope.safetensors"))


def test_graph_warm_up_is_undone_exactly(image_folder: Path) -> None:
    """CUDA-graph capture runs warm-up steps first; snapshot/restore must leave no trace of them (CPU stand-in)."""
    from gpukit.train.augment import AugmentConfig
    from gpukit.train.data import load_folder
    from gpukit.train.models import seed_cnn
    from gpukit.train.step import Stepper

    data = load_folder(image_folder, 16, 0.0)
    images, labels = torch.from_numpy(data.train.images), torch.from_numpy(data.train.labels)
    perm, theta, _ = epoch_plan(0, 0, len(labels), 5, 8, AugmentConfig())

    def fresh(warm: bool) -> Stepper:
        torch.manual_seed(0)
        net = seed_cnn(16)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        stepper = Stepper(net, opt, images, labels, 5, 8, torch.device("cpu"), None, False)
        stepper.load_epoch(perm, theta, 1)
        if warm:
            snap = stepper.snapshot()
            stepper.warm_up(3)
            assert stepper.optimizer.state  # the warm-up really changed things
            stepper.restore(snap)
        for _ in range(4):
            stepper.step()
        return stepper

    a, b = fresh(True), fresh(False)
    for (ka, va), (kb, vb) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert a.read_and_reset() == b.read_and_reset()


def test_best_checkpoint_is_the_lowest_validation_loss_and_best_is_a_verified_pair(tmp_path: Path) -> None:
    """An epoch with a worse validation loss must not replace the best one; best.json/.safetensors verify after
    last has moved on (best is a hard link of an earlier last, not the current one)."""
    from gpukit.train.config import EpochMetrics
    from gpukit.train.saving import RunFiles
    from gpukit.train.selection import best_epoch

    files = RunFiles(tmp_path, True, {"model": "seed-cnn", "image_size": 16, "classes": ["a", "b"]})
    good = EpochMetrics(1, 0.5, 0.6, 0.5, 0.5, 8, 1.0, 8.0, 0.0, None)
    bad = EpochMetrics(2, 0.1, 0.9, 2.0, 1.0, 8, 1.0, 8.0, 0.0, None)  # higher accuracy, but a worse loss
    history: list[EpochMetrics] = []
    for i, m in enumerate((good, bad)):
        history.append(m)
        net = torch.nn.Linear(2, 1)
        torch.nn.init.constant_(net.weight, float(i))
        files.save_epoch(net, m, is_best=best_epoch(history, 1e-3) == m.epoch)
    files.flush()  # the writer thread has written both epochs
    assert json.loads((tmp_path / "last.json").read_text())["epoch"] == 2
    tensors, state = checkpoint.load(tmp_path / "best.json")
    assert state["epoch"] == 1 and state["tensors_file"] == "best.safetensors"
    assert float(tensors["weight"].max()) == 0.0  # epoch 1's weights, though last now holds epoch 2's


def test_preload_loads_torch_once_and_reports_the_wait() -> None:
    import sys

    from gpukit.train.preload import Preload

    pre = Preload("cpu")
    pre.start()
    first = pre._thread
    pre.start()  # a second start is a no-op: one thread
    assert pre._thread is first
    assert pre.wait() >= 0 and "torch" in sys.modules
    assert first is not None and not first.is_alive()


def test_checkpoints_are_snapshots_written_in_order_and_failures_surface(tmp_path: Path) -> None:
    """The writer thread gets copies: a weight changed right after save_epoch does not reach the file. Writes
    land in the order asked (last holds the later epoch), and a failed write raises in the run's thread."""
    from gpukit.train.config import EpochMetrics
    from gpukit.train.saving import RunFiles

    files = RunFiles(tmp_path, True, {"model": "seed-cnn", "image_size": 16, "classes": ["a", "b"]})
    net = torch.nn.Linear(2, 1)
    for epoch in (1, 2):
        with torch.no_grad():
            net.weight.fill_(float(epoch))
        files.save_epoch(net, EpochMetrics(epoch, 0.5, 0.6, 0.5, 0.5, 8, 1.0, 8.0, 0.0, None), is_best=True)
        with torch.no_grad():
            net.weight.fill_(99.0)  # the next epoch's training, racing the writer
    files.flush()
    tensors, state = checkpoint.load(tmp_path / "last.json")
    assert state["epoch"] == 2 and float(tensors["weight"].max()) == 2.0
    (tmp_path / "checkpoints").write_text("a file where the checkpoint folder should be")
    from gpukit.train.adam import Adam

    files.save_resume(net, Adam(net.parameters()), 1, 0, (0.0, 0), [])
    with pytest.raises(OSError):
        files.close()


def _metrics(epoch: int, val_loss: float) -> Any:
    from gpukit.train.config import EpochMetrics

    return EpochMetrics(epoch, 0.5, 0.6, val_loss, 0.5, 8, 1.0, 8.0, 0.0, None)


def test_held_back_checkpoints_keep_the_best_epochs_own_weights(tmp_path: Path) -> None:
    """Checkpoints not yet due: only the log line is written; a best epoch's weights are kept aside, so after
    end_run best holds epoch 2's weights, last and the one resume checkpoint epoch 3's."""
    from gpukit.train.adam import Adam
    from gpukit.train.saving import RunFiles

    files = RunFiles(tmp_path, True, {"model": "seed-cnn", "image_size": 16, "classes": ["a", "b"]},
                     checkpoint_every_s=1e9)  # fmt: skip
    net = torch.nn.Linear(2, 1)
    opt = Adam(net.parameters())
    history = []
    for epoch, loss, best in ((1, 1.0, True), (2, 0.5, True), (3, 0.9, False)):
        with torch.no_grad():
            net.weight.fill_(float(epoch))
        history.append(_metrics(epoch, loss))
        files.end_epoch(net, opt, history[-1], best, history)
    files.flush()
    assert not list((tmp_path / "checkpoints").glob("*.json")) and not (tmp_path / "last.json").exists()
    assert (tmp_path / "train.log").read_text().count("\n") == 3
    files.end_run(net, opt, history)
    files.close()
    best_t, best_s = checkpoint.load(tmp_path / "best.json")
    last_t, last_s = checkpoint.load(tmp_path / "last.json")
    assert best_s["epoch"] == 2 and float(best_t["weight"].max()) == 2.0
    assert last_s["epoch"] == 3 and float(last_t["weight"].max()) == 3.0
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path / "checkpoints")] == ["ckpt-e00003-s0000000.json"]


def test_every_epoch_with_zero_and_a_held_best_written_on_a_signal(tmp_path: Path) -> None:
    from gpukit.train.adam import Adam
    from gpukit.train.saving import RunFiles

    ident = {"model": "seed-cnn", "image_size": 16, "classes": ["a", "b"]}
    files = RunFiles(tmp_path / "a", True, ident, checkpoint_every_s=0)
    (tmp_path / "a" / "checkpoints").mkdir(parents=True)
    net = torch.nn.Linear(2, 1)
    opt = Adam(net.parameters())
    history = [_metrics(1, 1.0), _metrics(2, 0.5)]
    files.end_epoch(net, opt, history[0], True, history[:1])
    files.end_epoch(net, opt, history[1], True, history)
    files.close()
    assert len(checkpoint.list_checkpoints(tmp_path / "a" / "checkpoints")) == 2
    held = RunFiles(tmp_path / "b", True, ident, checkpoint_every_s=1e9)
    (tmp_path / "b").mkdir()
    held.end_epoch(net, opt, history[0], True, history[:1])
    held.write_held_best()  # what the loop does when a signal stops the run
    held.close()
    assert checkpoint.load(tmp_path / "b" / "best.json")[1]["epoch"] == 1


def test_a_short_run_writes_one_checkpoint_at_the_end(tmp_path: Path) -> None:
    from train_testdata import make_folder

    from gpukit.train.config import TrainConfig
    from gpukit.train.loop import train

    data = make_folder(tmp_path / "d", per_class=24, size=16)
    result = train(TrainConfig(data=data, out=tmp_path / "r", model="seed-cnn", image_size=16, device="cpu",
                               epochs=4, batch_size=8, min_steps=0))  # fmt: skip
    assert [m.epoch for m in result.epochs] == [1, 2, 3, 4]
    names = [p.name for p in checkpoint.list_checkpoints(tmp_path / "r" / "checkpoints")]
    assert names == ["ckpt-e00004-s0000000.json"]
    assert checkpoint.load(tmp_path / "r" / "last.json")[1]["epoch"] == 4
    assert checkpoint.load(tmp_path / "r" / "best.json")[1]["epoch"] == result.best_epoch


def test_short_epochs_are_validated_on_a_cadence_and_every_epoch_when_asked(image_folder: Path, tmp_path: Path) -> None:
    result = train(_cfg(image_folder, tmp_path / "auto", epochs=10))
    steps = result.epochs[0].images // 8
    every = -(-30 // steps)  # about every 30 steps: 4-step epochs are validated every 8th
    assert 1 < every < 10
    validated = [m.epoch for m in result.epochs if m.val_loss is not None]
    assert validated == sorted({1, every, 10} | set(range(every, 11, every)))
    assert all(m.val_accuracy is None for m in result.epochs if m.epoch not in validated)
    assert result.best_epoch in validated and any(f"validated every {every} epochs" in n for n in result.notes)
    log = (tmp_path / "auto" / "train.log").read_text()
    assert log.count("not validated") == 10 - len(validated)
    summary = json.loads((tmp_path / "auto" / "summary.json").read_text())
    assert json.loads((tmp_path / "auto" / "settings.json").read_text())["val_every"] == 0
    assert summary["best_epoch"] == result.best_epoch
    every_epoch = train(_cfg(image_folder, tmp_path / "all", epochs=10, val_every=1))
    assert all(m.val_loss is not None for m in every_epoch.epochs)
    assert not any("validated every" in n for n in every_epoch.notes)


@pytest.mark.parametrize("amx", [True, False])
def test_auto_amp_on_the_cpu_is_bf16_with_amx_and_fp32_without(
    image_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, amx: bool
) -> None:
    import gpukit.hardware.cpu as cpu

    monkeypatch.setattr(cpu, "amx_bf16_usable", lambda: amx)
    result = train(_cfg(image_folder, tmp_path / "run", epochs=1))
    assert result.amp == ("bf16" if amx else "off")
    assert any("bf16 autocast on the CPU" in n for n in result.notes) == amx
    forced = train(_cfg(image_folder, tmp_path / "off", epochs=1, amp="off"))
    assert forced.amp == "off" and not any("autocast" in n for n in forced.notes)
