"""`gpukit train` in real processes: SIGKILL + --resume, and DDP with two gloo processes under torchrun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "train"))
from train_testdata import make_folder  # noqa: E402

from gpukit.train import checkpoint  # noqa: E402
from gpukit.train.config import TrainConfig  # noqa: E402
from gpukit.train.loop import train  # noqa: E402

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}


def _train_args(data: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gpukit", "train", str(data), "--model", "seed-cnn", "--image-size", "16",
            "--device", "cpu", "--seed", "3", "--quiet", "--min-steps", "0", "--out", str(out), *extra]  # fmt: skip


def _weights(run: Path) -> dict[str, Any]:
    return checkpoint.load(run / "last.json")[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_folder(tmp_path_factory.mktemp("d") / "data", per_class=48, size=16)


def test_sigkill_then_resume_ends_where_an_uninterrupted_run_ends(data: Path, tmp_path: Path) -> None:
    args = ("--epochs", "30", "--batch-size", "4", "--checkpoint-every-s", "0")  # a resume point every epoch
    whole = subprocess.run(_train_args(data, tmp_path / "whole", *args), env=_env(), timeout=300)
    assert whole.returncode == 0
    proc = subprocess.Popen(_train_args(data, tmp_path / "cut", *args), env=_env())
    deadline = time.monotonic() + 90
    ckpts = tmp_path / "cut" / "checkpoints"
    while not list(ckpts.glob("ckpt-e00002-*.json")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # no chance to save: only the checkpoints already on disk survive
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert not (tmp_path / "cut" / "summary.json").exists()  # it really died before the end
    resumed = subprocess.run(_train_args(data, tmp_path / "cut", *args, "--resume"), env=_env(), timeout=300)
    assert resumed.returncode == 0
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=0, rtol=0)


def test_ddp_two_gloo_processes_match_one_process(data: Path, tmp_path: Path) -> None:
    """Two ranks with batch 4 take the same steps as one process with batch 8: every rank slices the same
    seeded global batch (rank r takes items 4r…4r+3), gradients are averaged by DDP, and the mean of the two
    halves' mean losses is the whole batch's mean loss. Only the summation order differs. In fp32: bf16 (the default
    on a CPU with AMX) rounds each half's activations apart, which moves the weights by more than summation order."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           *_train_args(data, tmp_path / "ddp", "--epochs", "2", "--batch-size", "4", "--amp", "off")[1:]]  # fmt: skip
    proc = subprocess.run(cmd, env=_env(), timeout=400, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = train(TrainConfig(data=data, out=tmp_path / "one", model="seed-cnn", image_size=16, device="cpu", seed=3,
                            epochs=2, batch_size=8, min_steps=0, amp="off"))  # fmt: skip
    summary = (tmp_path / "ddp" / "summary.json").read_text()
    assert '"world_size": 2' in summary
    a, b = _weights(tmp_path / "ddp"), _weights(tmp_path / "one")
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=2e-5, rtol=1e-4)
    assert one.epochs[-1].val_accuracy == 1.0
