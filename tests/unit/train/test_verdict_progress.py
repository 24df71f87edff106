"""Knowing when nothing was learned (the verdict, its warning, the mirrored note's silence) and the progress display:
a bar with images/s under a terminal, plain lines when piped."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpukit.train.augment import recipe  # noqa: E402
from gpukit.train.config import EpochMetrics, TrainConfig  # noqa: E402
from gpukit.train.loop import train  # noqa: E402
from gpukit.train.selection import (  # noqa: E402
    GENERALISED,
    NOT_CHECKED,
    NOT_GENERALISED,
    chance_accuracy,
    clearly_above_chance,
    generalisation,
)


def _m(epoch: int, train_acc: float, val_acc: float | None, val_loss: float | None = 0.7) -> EpochMetrics:
    return EpochMetrics(epoch, 0.5, train_acc, val_loss, val_acc, 32, 1.0, 32.0, 0.0, None)


def test_chance_is_the_majority_share_and_above_it_means_three_sigma() -> None:
    assert chance_accuracy([0, 0, 0, 1]) == 0.75 and chance_accuracy([]) is None
    assert not clearly_above_chance(0.55, 0.5, 80) and not clearly_above_chance(0.66, 0.5, 80)
    assert clearly_above_chance(0.70, 0.5, 80) and clearly_above_chance(0.9, 0.5, 40)
    assert not clearly_above_chance(0.53, 0.5, 100_000)  # 5 points at least, however many images
    assert not clearly_above_chance(None, 0.5, 80) and not clearly_above_chance(0.9, None, 80)


def test_the_verdict_names_memorisation_and_only_memorisation() -> None:
    memorised = [_m(1, 0.6, 0.50, 0.69), _m(2, 0.9, 0.55, 0.9), _m(3, 1.0, 0.52, 2.3)]
    verdict, warning = generalisation(memorised, 0.5, 80)
    assert verdict == NOT_GENERALISED and warning is not None
    assert "did not generalise" in warning and "0.550" in warning and "Try:" in warning
    learned = [_m(1, 0.6, 0.62, 0.6), _m(2, 0.9, 0.85, 0.4), _m(3, 0.98, 0.96, 0.2)]
    assert generalisation(learned, 0.5, 80) == (GENERALISED, None)
    # the validation loss only rises from the first epoch while the training accuracy climbs: also memorisation,
    # even with a validation accuracy above chance
    rising = [_m(1, 0.6, 0.80, 0.45), _m(2, 0.9, 0.78, 0.6), _m(3, 1.0, 0.75, 1.2)]
    verdict, warning = generalisation(rising, 0.5, 80)
    assert verdict == NOT_GENERALISED and "validation loss only rose" in str(warning)
    # nothing climbed and validation stays at chance (a hard task, or too few steps): nothing was learned, which
    # did not generalise either, but it is not called memorisation (the seed recipe on 4 stroked letters, 2026-12-04)
    flat = [_m(1, 0.26, 0.25), _m(2, 0.30, 0.26), _m(3, 0.33, 0.28)]
    verdict, warning = generalisation(flat, 0.25, 160)
    assert verdict == NOT_GENERALISED and "nothing was learned" in str(warning) and "memorised" not in str(warning)
    assert "0.330" in str(warning) and "Try:" in str(warning)
    # validation clearly above chance while the training accuracy has not climbed yet: it generalises
    early = [_m(1, 0.52, 0.75), _m(2, 0.55, 0.8)]
    assert generalisation(early, 0.5, 80) == (GENERALISED, None)
    assert generalisation([_m(1, 1.0, None, None)], None, 0) == (NOT_CHECKED, None)


def _noise_folder(root: Path, per_class: int = 40, size: int = 16) -> Path:
    """Two classes of the same random noise: nothing to learn, much to memorise."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(root / name / f"{i}.png")
    return root


def test_a_run_that_memorises_says_so_and_keeps_the_mirror_note_quiet(tmp_path: Path) -> None:
    data = _noise_folder(tmp_path / "noise")
    cfg = TrainConfig(data=data, out=tmp_path / "run", model="seed-cnn", image_size=16, epochs=12, batch_size=16,
                      device="cpu", min_steps=0, augment=recipe("none"), weight_decay=0.0, label_smoothing=0.0,
                      lr=3e-3, checkpoint_every_s=1e9)  # fmt: skip
    result = train(cfg)
    assert result.epochs[-1].train_accuracy > 0.9  # it memorised the training noise
    assert result.verdict == NOT_GENERALISED and result.chance_accuracy == 0.5
    assert any("did not generalise" in w for w in result.warnings)
    assert not any("mirror" in n for n in result.notes + result.warnings)  # a model at chance says nothing of it
    import json

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["verdict"] == "did not generalise" and summary["chance_accuracy"] == 0.5


# -- the progress display -------------------------------------------------------------------------------------
def _events(epochs: int = 2, steps: int = 4) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"kind": "data", "train": 64, "val": 16, "skipped": 0, "decode_s": 0.1},
                                 {"kind": "start", "epochs": epochs, "steps": steps, "epoch": 0, "step": 0,
                                  "global_batch": 16}]  # fmt: skip
    for e in range(1, epochs + 1):
        for s in range(1, steps + 1):
            out.append({"kind": "step", "epoch": e, "step": s, "steps": steps, "images_per_s": 1234.0,
                        "data_wait_s": 0.0, "gpu_util_pct": None})  # fmt: skip
        out.append({"kind": "epoch", "metrics": EpochMetrics(e, 0.5, 0.8, 0.4, 0.75, 64, 0.05, 1280.0, 0.0, None)})
    return out


def _show(terminal: bool) -> str:
    from rich.console import Console

    from gpukit.cli.train import _Progress

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=terminal, width=160, color_system="standard" if terminal else None)
    progress = _Progress(quiet=False, console=console)
    for event in _events():
        progress(event)
        if terminal and progress.progress is not None:
            progress.progress.refresh()  # draw now, as the live display's timer would
    progress.stop()
    return buf.getvalue()


def test_a_terminal_gets_a_bar_with_images_per_second_over_the_whole_run() -> None:
    import re

    raw = _show(terminal=True)
    assert "\x1b[" in raw  # drawn live, with control codes
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "1,234 img/s" in shown and "epoch 1/2" in shown and "steps" in shown
    assert "/8" in shown  # one bar over both epochs' 8 steps, not one per epoch
    assert "val acc 0.750" in shown  # the last validation accuracy rides on the bar
    assert "epoch 2: loss 0.5000" in shown  # the epoch lines stay
    assert shown.count("1,234 img/s") >= 2  # redrawn as the steps came


def test_piped_output_is_plain_lines_without_a_bar() -> None:
    shown = _show(terminal=False)
    assert "\x1b[" not in shown and "img/s," not in shown.split("epoch 1:")[0]
    lines = shown.strip().splitlines()
    assert lines[0].startswith("data: 64 train") and len(lines) == 3
    assert lines[1].startswith("epoch 1: loss") and lines[2].startswith("epoch 2: loss")


def test_progress_events_come_by_time_as_well_as_by_step(image_folder: Path, tmp_path: Path) -> None:
    """A small set has few steps an epoch (fewer than --log-every): the bar still moves within the epoch."""
    import gpukit.train.loop as loop

    events: list[dict[str, Any]] = []
    old = loop.PROGRESS_EVERY_S
    loop.PROGRESS_EVERY_S = 0.0  # every step is "late": one event per step
    try:
        cfg = TrainConfig(data=image_folder, out=tmp_path / "r", model="seed-cnn", image_size=16, epochs=1,
                          batch_size=8, device="cpu", min_steps=0, checkpoint_every_s=1e9)  # fmt: skip
        train(cfg, on_event=events.append)
    finally:
        loop.PROGRESS_EVERY_S = old
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["data", "start"] and kinds[-1] == "epoch"
    steps = [e for e in events if e["kind"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, events[1]["steps"] + 1))  # log_every is 50: by time only
    assert all(e["images_per_s"] > 0 for e in steps)


def test_a_long_run_shows_about_25_epoch_lines_and_table_rows() -> None:
    from rich.console import Console

    from gpukit.cli.train import _Progress, _shown_epochs
    from gpukit.train.config import TrainResult

    buf = io.StringIO()
    progress = _Progress(quiet=False, console=Console(file=buf, force_terminal=False, width=160))
    progress({"kind": "start", "epochs": 200, "steps": 10, "epoch": 0, "step": 0, "global_batch": 32})
    history = [EpochMetrics(e, 0.5, 0.8, 0.4 + abs(e - 77) / 1000, 0.75, 320, 0.05, 6400.0, 0.0, None)
               for e in range(1, 201)]  # fmt: skip
    for m in history:
        progress({"kind": "epoch", "metrics": m})
    lines = buf.getvalue().strip().splitlines()
    assert len(lines) == 25 and lines[0].startswith("epoch 8:") and lines[-1].startswith("epoch 200:")
    result = TrainResult(None, ["a", "b"], "small-cnn", "cpu", 1, "off", "cpu", False, 256, 64, 0, 0.1, history,
                         best_epoch=77)  # fmt: skip
    shown = [m.epoch for m in _shown_epochs(result)]
    assert shown[:2] == [1, 8] and 77 in shown and shown[-1] == 200 and len(shown) == 27


def test_with_a_validation_cadence_the_lines_and_rows_shown_are_validated_epochs() -> None:
    from rich.console import Console

    from gpukit.cli.train import _Progress, _shown_epochs
    from gpukit.train.config import TrainResult
    from gpukit.train.selection import validates

    buf = io.StringIO()
    progress = _Progress(quiet=False, console=Console(file=buf, force_terminal=False, width=160))
    progress({"kind": "start", "epochs": 1200, "steps": 3, "epoch": 0, "step": 0, "global_batch": 32,
              "val_every": 10})  # fmt: skip
    history = [EpochMetrics(e, 0.5, 0.8, 0.4 if validates(e, 10, 1200) else None,
                            0.75 if validates(e, 10, 1200) else None, 96, 0.01, 9600.0, 0.0, None)
               for e in range(1, 1201)]  # fmt: skip
    for m in history:
        progress({"kind": "epoch", "metrics": m})
    lines = buf.getvalue().strip().splitlines()
    # every 48th epoch would be 25 lines; rounded up to every 50th, a multiple of 10, each line has its validation
    assert len(lines) == 24 and lines[0].startswith("epoch 50:") and lines[-1].startswith("epoch 1200:")
    assert all("val loss 0.4000" in line for line in lines)
    result = TrainResult(None, ["a", "b"], "small-cnn", "cpu", 1, "off", "cpu", False, 120, 40, 0, 0.1, history,
                         best_epoch=1)  # fmt: skip
    shown = _shown_epochs(result)
    assert all(m.val_loss is not None for m in shown) and shown[0].epoch == 1 and shown[-1].epoch == 1200
    assert 20 <= len(shown) <= 27
