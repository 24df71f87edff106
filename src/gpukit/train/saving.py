"""What a run writes (rank 0 only): resume checkpoints, ``last`` and ``best``, metrics, log, skipped files, summary.

Each epoch writes one resume checkpoint (model + optimizer, ``checkpoints/ckpt-eEEEEE-sSSSSSSS``, the newest three
kept) and ``last`` (the model only, what ``predict`` and ``export`` read). ``best`` is ``last`` hard-linked when
the epoch is the new best (selection.py), not written a second time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.train import checkpoint, outputs
from gpukit.train.config import EpochMetrics, TrainResult

if TYPE_CHECKING:
    import torch

__all__ = ["RunFiles"]

KEEP_CHECKPOINTS = 3


@dataclass
class RunFiles:
    run_dir: Path
    is_main: bool
    identity: dict[str, Any]  # model, image_size, classes, seed, steps_per_epoch, global_batch
    save_s: float = 0.0  # wall time spent writing, summed

    def save_resume(self, net: torch.nn.Module, optimizer: torch.optim.Optimizer, epoch: int, step: int,
                    carried: tuple[float, int], history: list[EpochMetrics]) -> None:  # fmt: skip
        """A full checkpoint at (epochs done, steps done in the next epoch)."""
        if not self.is_main:
            return
        t0 = time.perf_counter()
        tensors = {f"model.{k}": v for k, v in net.state_dict().items()}
        tensors.update(checkpoint.optimizer_tensors(optimizer))
        folder = self.run_dir / "checkpoints"
        state = {**self.identity, "epoch": epoch, "step": step, "carried": [carried[0], carried[1], 0],
                 "history": [m.to_dict() for m in history], "saved_at": datetime.now(UTC).isoformat()}  # fmt: skip
        checkpoint.save(folder, f"ckpt-e{epoch:05d}-s{step:07d}", tensors, state)
        for old in checkpoint.list_checkpoints(folder)[KEEP_CHECKPOINTS:]:
            old.with_suffix(".safetensors").unlink(missing_ok=True)
            old.unlink(missing_ok=True)
        self.save_s += time.perf_counter() - t0

    def save_epoch(self, net: torch.nn.Module, metrics: EpochMetrics, is_best: bool) -> None:
        """``last`` (and ``best`` when this epoch is it), the metrics CSV so far and the log line."""
        if not self.is_main:
            return
        t0 = time.perf_counter()
        meta = {key: self.identity[key] for key in ("model", "image_size", "classes")}
        meta.update(epoch=metrics.epoch, val_loss=metrics.val_loss, val_accuracy=metrics.val_accuracy,
                    train_accuracy=metrics.train_accuracy)  # fmt: skip
        last = checkpoint.save(self.run_dir, "last", dict(net.state_dict()), meta)
        if is_best:
            checkpoint.link_or_copy(last, self.run_dir / "best.json")
        self.log(outputs.epoch_line(metrics))
        self.save_s += time.perf_counter() - t0

    def log(self, line: str) -> None:
        if self.is_main:
            outputs.append_log(self.run_dir / "train.log", line)

    def write_start(self, settings: dict[str, Any], skipped: list[tuple[str, str]]) -> None:
        """settings.json, and every skipped file named in skipped.txt and the log (not only counted)."""
        if not self.is_main:
            return
        outputs.write_json(self.run_dir / "settings.json", settings)
        if skipped:
            text = "".join(f"{path}\t{reason}\n" for path, reason in skipped)
            checkpoint.atomic_write_bytes(self.run_dir / "skipped.txt", text.encode())
            for path, reason in skipped:
                self.log(f"skipped {path}: {reason}")

    def write_summary(self, result: TrainResult, curve: bool = True) -> None:
        if not self.is_main:
            return
        t0 = time.perf_counter()
        outputs.write_metrics_csv(self.run_dir / "metrics.csv", result.epochs)
        if result.epochs and curve:
            outputs.write_curve(self.run_dir / "curve.svg", result)
        self.save_s += time.perf_counter() - t0
        result.times.save_s = self.save_s
        outputs.write_json(self.run_dir / "summary.json", result.to_dict())
