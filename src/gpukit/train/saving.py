"""What a run writes (rank 0 only): resume checkpoints, ``last`` and ``best``, metrics, log, skipped files, summary.

Each epoch writes one resume checkpoint (model + optimizer, ``checkpoints/ckpt-eEEEEE-sSSSSSSS``, the newest three
kept) and ``last`` (the model only, what ``predict`` and ``export`` read). ``best`` is ``last`` hard-linked when
the epoch is the new best (selection.py), not written a second time.

How often: after an epoch once ``checkpoint_every_s`` (``--checkpoint-every-s``, 30 s) has passed since the
last checkpoint, after the last epoch, and when a signal stops the run; 0 writes after every epoch. Between
writes, a new best epoch's weights are kept as a host copy and written with the next checkpoint. On small sets
epochs are short: ResNet-18 on 900 digit scans wrote ~20 epochs × 180 MB, 30 s of a 40 s run on the H200.

Checkpoints are written by one background thread, in the order asked: the run copies the tensors to the host
(a snapshot the next epoch cannot change) and goes on training while the thread serializes, hashes, writes and
syncs them (0.9 s of a 4-epoch seed-CNN run on the H200, now hidden but for the last epoch's). ``flush()`` waits
for every write and raises the first failure; the run calls it before the summary, after a signal's checkpoint
and on the way out. ``save_s`` is the time the run itself spent on saving: the copies and those waits.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.train import checkpoint, outputs
from gpukit.train.config import EpochMetrics, TrainResult

if TYPE_CHECKING:
    import torch

    from gpukit.train.adam import Adam

__all__ = ["RunFiles"]

KEEP_CHECKPOINTS = 3


@dataclass
class RunFiles:
    run_dir: Path
    is_main: bool
    identity: dict[str, Any]  # model, image_size, classes, seed, steps_per_epoch, global_batch
    save_s: float = 0.0  # wall time the run spent saving (host copies, waits for the writer), summed
    checkpoint_every_s: float = 0.0  # the least time between checkpoints after epochs (0: every epoch)
    _last_save: float = field(default_factory=time.monotonic, repr=False)
    _best: tuple[dict[str, Any], EpochMetrics] | None = field(default=None, repr=False)  # a best not yet written
    _unsaved: EpochMetrics | None = field(default=None, repr=False)  # the newest epoch without checkpoints
    _writer: ThreadPoolExecutor | None = field(default=None, repr=False)
    _pending: list[Future[None]] = field(default_factory=list, repr=False)

    def _submit(self, job: Any, *args: Any) -> None:
        self._raise_failed()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpukit-ckpt")
        self._pending.append(self._writer.submit(job, *args))

    def _raise_failed(self) -> None:
        """Drop finished writes; raise the first that failed (a full disk, say) in the run's own thread."""
        still = []
        for future in self._pending:
            if not future.done():
                still.append(future)
            elif (exc := future.exception()) is not None:
                self._pending = []
                raise exc
        self._pending = still

    def flush(self) -> None:
        """Wait until every checkpoint asked for is on disk; raise the first failure."""
        t0 = time.perf_counter()
        try:
            for future in self._pending:
                future.result()
        finally:
            self._pending = []
            self.save_s += time.perf_counter() - t0

    def close(self) -> None:
        """``flush()``, then stop the writer thread."""
        try:
            self.flush()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None

    def save_resume(self, net: torch.nn.Module, optimizer: Adam, epoch: int, step: int,
                    carried: tuple[float, int], history: list[EpochMetrics],
                    model: dict[str, torch.Tensor] | None = None) -> None:  # fmt: skip
        """A full checkpoint at (epochs done, steps done in the next epoch); ``model``: a host copy already made."""
        if not self.is_main:
            return
        t0 = time.perf_counter()
        model = model if model is not None else _host_copy(dict(net.state_dict()))
        tensors = {f"model.{k}": v for k, v in model.items()}
        tensors.update(checkpoint.optimizer_tensors(optimizer))  # host copies already
        folder = self.run_dir / "checkpoints"
        state = {**self.identity, "epoch": epoch, "step": step, "carried": [carried[0], carried[1], 0],
                 "history": [m.to_dict() for m in history], "saved_at": datetime.now(UTC).isoformat()}  # fmt: skip
        self._submit(_write_resume, folder, f"ckpt-e{epoch:05d}-s{step:07d}", tensors, state)
        self.save_s += time.perf_counter() - t0

    def end_epoch(self, net: torch.nn.Module, optimizer: Adam, metrics: EpochMetrics, is_best: bool,
                  history: list[EpochMetrics]) -> None:  # fmt: skip
        """After an epoch: its log line, and its checkpoints (resume, ``last``, ``best``) when they are due; if not,
        a best epoch's weights are kept on the host until the next checkpoint (``end_run`` writes what is left)."""
        if not self.is_main:
            return
        self.log(outputs.epoch_line(metrics))
        if time.monotonic() - self._last_save >= self.checkpoint_every_s:
            self._checkpoint(net, optimizer, metrics, is_best, history)
            return
        t0 = time.perf_counter()
        if is_best:
            self._best = (_host_copy(dict(net.state_dict())), metrics)
        self._unsaved = metrics
        self.save_s += time.perf_counter() - t0

    def end_run(self, net: torch.nn.Module, optimizer: Adam, history: list[EpochMetrics]) -> None:
        """The checkpoints ``end_epoch`` held back, for the last epoch run (the network is as it left it)."""
        if self.is_main and self._unsaved is not None:
            best = self._best is not None and self._best[1] is self._unsaved
            if best:
                self._best = None  # the same weights as last: best links to it
            self._checkpoint(net, optimizer, self._unsaved, best, history)

    def write_held_best(self) -> None:
        """A best epoch's weights held back by ``end_epoch`` (a signal stopped the run before its checkpoint)."""
        if self.is_main and self._best is not None:
            tensors, metrics = self._best
            self._best = None
            self._submit(_write_named, self.run_dir, "best", tensors, self._meta(metrics))

    def _checkpoint(self, net: torch.nn.Module, optimizer: Adam, metrics: EpochMetrics, is_best: bool,
                    history: list[EpochMetrics]) -> None:  # fmt: skip
        if not is_best:
            self.write_held_best()  # an earlier epoch was the best: its own weights
        self._best = self._unsaved = None
        t0 = time.perf_counter()
        model = _host_copy(dict(net.state_dict()))  # one copy for both files
        self.save_s += time.perf_counter() - t0
        self.save_resume(net, optimizer, metrics.epoch, 0, (0.0, 0), history, model)
        self.save_epoch(net, metrics, is_best, model)
        self._last_save = time.monotonic()

    def _meta(self, metrics: EpochMetrics) -> dict[str, Any]:
        meta = {key: self.identity[key] for key in ("model", "image_size", "classes")}
        meta.update(epoch=metrics.epoch, val_loss=metrics.val_loss, val_accuracy=metrics.val_accuracy,
                    train_accuracy=metrics.train_accuracy)  # fmt: skip
        return meta

    def save_epoch(self, net: torch.nn.Module, metrics: EpochMetrics, is_best: bool,
                   model: dict[str, torch.Tensor] | None = None) -> None:  # fmt: skip
        """``last`` (and ``best`` when this epoch is it); ``model``: a host copy already made."""
        if not self.is_main:
            return
        t0 = time.perf_counter()
        model = model if model is not None else _host_copy(dict(net.state_dict()))
        self._submit(_write_last, self.run_dir, model, self._meta(metrics), is_best)
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
        self.flush()
        t0 = time.perf_counter()
        outputs.write_metrics_csv(self.run_dir / "metrics.csv", result.epochs)
        if result.epochs and curve:
            outputs.write_curve(self.run_dir / "curve.svg", result)
        self.save_s += time.perf_counter() - t0
        result.times.save_s = self.save_s
        outputs.write_json(self.run_dir / "summary.json", result.to_dict())


def _host_copy(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Host copies the next training step cannot change (``to("cpu")`` alone would return a CPU tensor itself)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in tensors.items()}


def _write_resume(folder: Path, name: str, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
    checkpoint.save(folder, name, tensors, state)
    for old in checkpoint.list_checkpoints(folder)[KEEP_CHECKPOINTS:]:
        old.with_suffix(".safetensors").unlink(missing_ok=True)
        old.unlink(missing_ok=True)


def _write_named(run_dir: Path, name: str, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    checkpoint.save(run_dir, name, tensors, meta)


def _write_last(run_dir: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any], is_best: bool) -> None:
    last = checkpoint.save(run_dir, "last", tensors, meta)
    if is_best:
        checkpoint.link_or_copy(last, run_dir / "best.json")
