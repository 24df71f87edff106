"""`gpukit train`: the whole run — data, model, epochs, checkpoints, outputs — on a CPU, one GPU or many.

The library never prints: progress goes to an optional ``on_event`` callback (the CLI draws the bar) and the run
returns a :class:`TrainResult`. Reproducibility: the model is initialised from ``seed``; each epoch's batch order,
augmentation and learning rates are drawn up front from (seed, epoch). A run resumed from a checkpoint at
(epoch, step) therefore continues exactly where the uninterrupted run would have been.

The parts: ``parts.py`` builds the network, optimizer and stepper; ``resume.py`` reads a checkpoint folder into a
typed resume point this loop applies; ``selection.py`` ranks epochs and stops early; ``evaluate.py`` validates in
fp32; ``saving.py`` writes the run folder. This file runs the epochs and keeps the wall-time split.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from gpukit.hardware.cpu import cpu_budget
from gpukit.train import distributed, selection
from gpukit.train.augment import AugmentConfig, draw_jitter, draw_thetas
from gpukit.train.ckpt_meta import load_weights
from gpukit.train.config import EpochMetrics, TrainConfig, TrainResult, WallTimes
from gpukit.train.data import load_folder
from gpukit.train.evaluate import evaluate
from gpukit.train.monitor import UtilSampler
from gpukit.train.parts import build_parts, make_run_dir
from gpukit.train.preload import Preload
from gpukit.train.resume import ResumePoint, RunIdentity, find_resume_point
from gpukit.train.saving import RunFiles
from gpukit.train.schedule import epochs_for, lr_table

__all__ = ["epoch_plan", "train"]

EventFn = Callable[[dict[str, Any]], None]
PROGRESS_EVERY_S = 0.5  # a progress event at least this often (and every log_every steps), for the bar's images/s
MIRROR_GAP = 0.02  # mirrored validation this much below upright (and ≥ 2 images): the data is not mirror-symmetric


def epoch_plan(
    seed: int, epoch: int, n: int, steps: int, global_batch: int, aug: AugmentConfig
) -> tuple[Any, Any, Any]:
    """Batch indices (steps, G), augmentation matrices (steps, G, 2, 3) and colour-jitter factors (steps, G, 3) of
    one epoch, on the CPU (the jitter None when the recipe has none)."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(n, generator=g)[: steps * global_batch].view(steps, global_batch)
    theta = draw_thetas(steps * global_batch, aug, g).view(steps, global_batch, 2, 3)
    jitter = draw_jitter(steps * global_batch, aug, g).view(steps, global_batch, 3) if aug.jitters else None
    return perm, theta, jitter


def train(cfg: TrainConfig, on_event: EventFn | None = None, started_at: float | None = None) -> TrainResult:
    """Train as configured; under torchrun, every rank calls this and rank 0 writes the outputs. ``started_at``
    (a ``time.time()``, e.g. the process's start) makes the wall-time split count the start-up before the call."""
    entered = time.time()  # start-up ends here: interpreter and CLI imports; torch is imported during the decode
    cfg.validate()
    preload = Preload(cfg.device)
    # torchrun: join the group first, as every rank must; one process: the device is resolved after the decode,
    # so that torch's import overlaps it (a --device cuda without a GPU then fails after the decode)
    info = distributed.setup(cfg.device) if distributed.launched() else None
    run: _Run | None = None
    try:
        run = _Run(cfg, info, on_event or (lambda _e: None), entered, started_at, preload)
        try:
            result = run.run()
        finally:
            run.files.close()  # every checkpoint asked for is on disk, also when the run failed
        # Every rank waits here until rank 0 has written its outputs, so all tear the group down together
        # (distributed.cleanup says why the teardown needs care).
        distributed.barrier(run.info)
        return result
    finally:
        final = run.info if run is not None else info
        if final is not None:
            distributed.cleanup(final)


class _Run:
    def __init__(self, cfg: TrainConfig, info: distributed.DistInfo | None, on_event: EventFn, entered: float,
                 started_at: float | None, preload: Preload) -> None:  # fmt: skip
        self.cfg, self.emit = cfg, on_event
        self.t_start = started_at if started_at is not None else entered
        self.times = WallTimes(startup_s=entered - self.t_start)
        self.stop_requested = False
        # before the decode: a bad --resume/--out fails at once (one process is rank 0 whatever its device)
        self.run_dir = make_run_dir(cfg, info or distributed.DistInfo(0, 1, 0, cfg.device, None))
        t0 = time.perf_counter()
        workers = cfg.workers or max(1, min(16, (cpu_budget() // max(1, _local_world()))))
        self.data = load_folder(cfg.data, cfg.image_size, cfg.val_fraction, cfg.seed, workers, preload.start)
        self.times.decode_s = time.perf_counter() - t0
        self.times.imports_s = preload.wait()  # torch and the CUDA context: what the decode did not hide
        self.emit({"kind": "data", "train": len(self.data.train), "val": len(self.data.val),
                   "skipped": self.data.skipped_count, "decode_s": self.times.decode_s})  # fmt: skip
        t0 = time.perf_counter()
        self.info = info = info if info is not None else distributed.setup(cfg.device)
        self.parts = build_parts(cfg, info, self.data)
        self.times.setup_s = time.perf_counter() - t0
        p = self.parts
        self.epochs = epochs_for(cfg.epochs, p.steps, cfg.min_steps)
        self.notes = list(p.notes)
        self.warnings: list[str] = []
        if self.epochs > cfg.epochs:
            self.notes.append(f"{self.epochs} epochs instead of {cfg.epochs}: {p.steps} steps an epoch, and "
                              f"--min-steps asks for at least {cfg.min_steps} steps")  # fmt: skip
        self.val_every = selection.validation_every(cfg.val_every, p.steps)
        if len(self.data.val) and not all(selection.validates(e, self.val_every, self.epochs)
                                          for e in range(1, self.epochs + 1)):  # fmt: skip
            self.notes.append(f"validated every {self.val_every} epochs (and the first and last): an epoch is "
                              f"{p.steps} steps; --val-every sets it")  # fmt: skip
        if (warning := selection.small_val_warning(len(self.data.val))) is not None:
            self.warnings.append(warning)
        self.identity = RunIdentity(cfg.model, cfg.seed, p.global_batch, cfg.image_size, self.data.classes, p.steps)
        ident = {"model": cfg.model, "image_size": cfg.image_size, "classes": self.data.classes, "seed": cfg.seed,
                 "steps_per_epoch": p.steps, "global_batch": p.global_batch}  # fmt: skip
        self.files = RunFiles(self.run_dir, info.is_main, ident, checkpoint_every_s=cfg.checkpoint_every_s)
        self.settings = {**cfg.to_dict(), "world_size": info.world_size, "planned_epochs": self.epochs}

    # -- the run -------------------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        point = self._resume()  # first: a run folder that cannot be resumed is left as it was, settings.json too
        self.files.write_start(self.settings, self.data.skipped)
        history = point.history if point else []
        start_epoch, start_step = (point.epoch, point.step) if point else (0, 0)
        carried = point.carried if point else (0.0, 0)
        self.result = self._result(str(point.source) if point else None)
        self.result.epochs = history
        old = self._install_signals()
        self.emit({"kind": "start", "epochs": self.epochs, "steps": self.parts.steps, "epoch": start_epoch,
                   "step": start_step, "global_batch": self.parts.global_batch,
                   "val_every": self.val_every})  # fmt: skip
        try:
            graph_pending = self._want_graph()
            for epoch in range(start_epoch, self.epochs):
                if selection.should_stop(history, self.cfg.patience, self.cfg.min_delta):
                    self.result.stopped_early = True
                    self.notes.append(f"stopped early after epoch {history[-1].epoch}: no validation-loss gain "
                                      f"> {self.cfg.min_delta:g} for {self.cfg.patience} epochs")  # fmt: skip
                    break
                first = start_step if epoch == start_epoch else 0
                self._load_plan(epoch, first)
                if graph_pending:
                    graph_pending = False
                    self._capture()
                metrics = self._epoch(epoch, first, carried)
                carried = (0.0, 0)
                if metrics is None:  # stopped by a signal; a checkpoint was saved
                    self.result.interrupted = True
                    break
                history.append(metrics)
                self.emit({"kind": "epoch", "metrics": metrics})
                best = selection.best_epoch(history, self.cfg.min_delta)
                self.files.end_epoch(self.parts.net, self.parts.optimizer, metrics, best == metrics.epoch, history)
        finally:
            self._restore_signals(old)
        return self._finish(history)

    def _resume(self) -> ResumePoint | None:
        if not self.cfg.resume:
            return None
        point, notes = find_resume_point(self.run_dir / "checkpoints", self.identity)
        self.notes += notes
        if point is None:
            return None
        from gpukit.train.checkpoint import restore_optimizer

        _check_layout(self.cfg.model, point)
        load_weights(self.parts.net, point.model_state, point.source)
        try:
            restore_optimizer(self.parts.optimizer, point.optimizer_state)
        except (RuntimeError, ValueError, KeyError) as exc:
            from gpukit.errors import ConfigError

            raise ConfigError(f"checkpoint {point.source}: its optimizer state does not fit this model ({exc})",
                              hint="resume with the settings of the original run") from exc  # fmt: skip
        return point

    def _finish(self, history: list[EpochMetrics]) -> TrainResult:
        r = self.result
        r.epochs = history
        r.best_epoch = selection.best_epoch(history, self.cfg.min_delta)
        r.chance_accuracy = selection.chance_accuracy(self.data.val.labels.tolist())
        r.verdict, warning = selection.generalisation(history, r.chance_accuracy, len(self.data.val))
        if warning is not None:
            self.warnings.append(warning)
        if history and not r.interrupted:
            self.files.end_run(self.parts.net, self.parts.optimizer, history)  # before validation: it only reads
            self._mirror_check(history[-1])
        r.notes, r.warnings = self.notes, self.warnings
        r.times.total_s = time.time() - self.t_start  # before the summary write, which is counted in save_s
        self.files.write_summary(r)
        r.times.total_s = time.time() - self.t_start
        if self.info.is_main:
            from gpukit.train.outputs import write_json

            write_json(self.run_dir / "summary.json", r.to_dict())  # with the final times
        return r

    def _mirror_check(self, last: EpochMetrics) -> None:
        """Validate mirrored too: a flip-trained model clearly worse on mirrored images means the data is not
        mirror-symmetric (a mirrored 3 is not a 3), and the flip was a mistake. Said only of a model clearly above
        chance upright: a model at chance says nothing about the data."""
        t0 = time.perf_counter()
        p = self.parts
        mirrored = evaluate(p.net, self.data.val, p.device, self.info, self.cfg.channels_last, mirrored=True)
        self.times.validate_s += time.perf_counter() - t0
        if mirrored is None or last.val_accuracy is None:
            return
        self.result.val_accuracy_mirrored = mirrored.accuracy
        gap = last.val_accuracy - mirrored.accuracy
        learned = selection.clearly_above_chance(last.val_accuracy, self.result.chance_accuracy, len(self.data.val))
        clear = learned and gap > max(MIRROR_GAP, 2 / len(self.data.val))
        aug = self.cfg.augment
        if clear and aug.enabled and aug.hflip:
            self.warnings.append(
                f"trained with --hflip, the model scores {mirrored.accuracy:.3f} on mirrored validation images and "
                f"{last.val_accuracy:.3f} upright: this data is not mirror-symmetric; train with --no-hflip"
            )
        elif clear:
            self.notes.append(
                f"mirrored validation images score {mirrored.accuracy:.3f} (upright {last.val_accuracy:.3f}): "
                "the data is not mirror-symmetric; keep --no-hflip"
            )

    def _result(self, resumed: str | None) -> TrainResult:
        p, d = self.parts, self.data
        return TrainResult(
            run_dir=self.run_dir, classes=d.classes, model=self.cfg.model, device=str(p.device),
            world_size=self.info.world_size, amp=p.amp, cache=p.cache, cuda_graphs=False,
            train_images=len(d.train), val_images=len(d.val), skipped_files=d.skipped_count,
            decode_s=self.times.decode_s, epochs=[], resumed_from=resumed, skipped=list(d.skipped),
            planned_epochs=self.epochs, times=self.times,
        )  # fmt: skip

    def _want_graph(self) -> bool:
        cfg, p = self.cfg, self.parts
        return (cfg.cuda_graphs and p.device.type == "cuda" and p.cache == "gpu" and not self.info.distributed
                and not cfg.compile and p.amp != "fp16" and p.steps >= 4)  # fmt: skip

    def _load_plan(self, epoch: int, start_step: int) -> None:
        cfg, p = self.cfg, self.parts
        perm, theta, jitter = epoch_plan(cfg.seed, epoch, len(self.data.train), p.steps, p.global_batch, cfg.augment)
        lo, hi = self.info.rank * p.batch, (self.info.rank + 1) * p.batch
        lrs = lr_table(epoch, p.steps, self.epochs, cfg.lr, cfg.schedule, cfg.warmup)
        p.stepper.load_epoch(perm[:, lo:hi], theta[:, lo:hi], start_step,
                             None if jitter is None else jitter[:, lo:hi], lrs)  # fmt: skip

    def _capture(self) -> None:
        t0 = time.perf_counter()
        try:
            self.parts.stepper.capture()
            self.result.cuda_graphs = True
        except Exception as exc:  # a model or op that cannot be captured: the eager step is the same training
            self.notes.append(f"CUDA graph capture failed, running eagerly: {type(exc).__name__}: {exc}")
        _sync(self.parts.device)
        self.times.capture_s += time.perf_counter() - t0

    def _epoch(self, epoch: int, start_step: int, carried: tuple[float, int]) -> EpochMetrics | None:
        import torch

        p = self.parts
        p.model.train()
        sampler = UtilSampler((p.device.index or 0) if p.device.type == "cuda" else None)
        sampler.start()
        p.stepper.data_wait_s = 0.0
        t0 = last_event = time.perf_counter()
        for step in range(start_step, p.steps):
            p.stepper.step()
            now = time.perf_counter()  # host time: on a GPU the rate is of queued steps, which run a few behind
            if (step + 1) % self.cfg.log_every == 0 or now - last_event >= PROGRESS_EVERY_S:
                last_event = now
                rate = (step + 1 - start_step) * p.global_batch / max(1e-9, now - t0)
                self.emit({"kind": "step", "epoch": epoch + 1, "step": step + 1, "steps": p.steps,
                           "images_per_s": rate, "data_wait_s": p.stepper.data_wait_s,
                           "gpu_util_pct": sampler.mean()})  # fmt: skip
            if self._should_stop(step):
                self._save_interrupted(epoch, step + 1, carried)
                sampler.stop()
                self.times.train_s += time.perf_counter() - t0
                return None
        loss_sum, hits = p.stepper.read_and_reset()  # host sync: the epoch's work is done when this returns
        epoch_s = time.perf_counter() - t0
        self.times.train_s += epoch_s
        util = sampler.stop()
        sums = torch.tensor([loss_sum, float(hits)], dtype=torch.float64, device=p.device)  # NCCL: device tensors
        distributed.all_reduce_sum(sums, self.info)
        seen = p.steps * p.global_batch
        total_loss, total_hits = sums[0].item() + carried[0], sums[1].item() + carried[1]
        t0 = time.perf_counter()
        scores = None
        if selection.validates(epoch + 1, self.val_every, self.epochs):
            scores = evaluate(p.net, self.data.val, p.device, self.info, self.cfg.channels_last)
        self.times.validate_s += time.perf_counter() - t0
        images = max(0, p.steps - start_step) * p.global_batch
        rate = images / epoch_s if epoch_s > 0 else 0.0
        return EpochMetrics(epoch + 1, total_loss / seen, total_hits / seen, scores.loss if scores else None,
                            scores.accuracy if scores else None, images, epoch_s, rate, p.stepper.data_wait_s,
                            util)  # fmt: skip

    # -- signals: Ctrl-C or SIGTERM ends the step in flight, saves, and returns --------------------------------
    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(_signum: int, _frame: Any) -> None:
            self.stop_requested = True

        return {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}

    @staticmethod
    def _restore_signals(old: dict[int, Any]) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _should_stop(self, step: int) -> bool:
        if not self.info.distributed:
            return self.stop_requested
        if (step + 1) % 20 and step + 1 != self.parts.steps:
            return False
        # ranks must agree, or one would wait forever in the next all-reduce: check together every 20 steps
        import torch

        flag = torch.tensor([1.0 if self.stop_requested else 0.0], device=self.parts.device)
        distributed.all_reduce_sum(flag, self.info)
        return bool(flag.item() > 0)

    def _save_interrupted(self, epoch: int, step: int, carried: tuple[float, int]) -> None:
        import torch

        p = self.parts
        loss_sum, hits = p.stepper.read_and_reset()
        sums = torch.tensor([loss_sum, float(hits)], dtype=torch.float64, device=p.device)  # NCCL: device tensors
        distributed.all_reduce_sum(sums, self.info)
        total = (sums[0].item() + carried[0], int(sums[1].item()) + carried[1])
        self.files.write_held_best()
        self.files.save_resume(p.net, p.optimizer, epoch, step, total, self.result.epochs)
        self.files.flush()  # on disk before the run returns: the process may be about to end
        self.notes.append(f"stopped by a signal at epoch {epoch + 1}, step {step}; resume with --resume")
        self.files.log(self.notes[-1])


def _sync(device: Any) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)  # the capture's work is done before its time is read


def _local_world() -> int:
    import os

    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def _check_layout(model: str, point: ResumePoint) -> None:
    """A small-cnn checkpoint of an earlier default layout loads for predict, export and serve, but a run resumes
    only on the network it was trained with: say so, rather than a tensor-size mismatch."""
    from gpukit.errors import ConfigError
    from gpukit.train.models import SMALL_CNN_FULL_RES_CONVS, SMALL_CNN_LAYOUT, SMALL_CNN_WIDTHS, small_cnn_layout

    if model != "small-cnn":
        return
    widths, convs = small_cnn_layout(point.model_state)
    if (widths, convs) != SMALL_CNN_LAYOUT:
        raise ConfigError(
            f"cannot resume {point.source}: it is a small-cnn of an earlier gpukit ({'-'.join(map(str, widths))} "
            f"channels, {convs} full-resolution convolution{'s' if convs > 1 else ''}); this one trains "
            f"{'-'.join(map(str, SMALL_CNN_WIDTHS))} with {SMALL_CNN_FULL_RES_CONVS}",
            hint="start a new run (its checkpoints still work with gpukit predict, export and serve)",
        )
