"""`gpukit train`: the whole run — data, model, epochs, checkpoints, outputs — on a CPU, one GPU or many.

The library never prints: progress goes to an optional ``on_event`` callback (the CLI draws the bar) and the run
returns a :class:`TrainResult`. Reproducibility: the model is initialised from ``seed``; each epoch's batch order
and augmentation are drawn up front from a generator seeded by (seed, epoch). A run resumed from a checkpoint at
(epoch, step) therefore continues exactly where the uninterrupted run would have been.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.train import checkpoint, distributed, outputs
from gpukit.train.augment import AugmentConfig, draw_thetas
from gpukit.train.config import EpochMetrics, TrainConfig, TrainResult
from gpukit.train.data import FolderData, load_folder
from gpukit.train.models import build_model
from gpukit.train.monitor import UtilSampler
from gpukit.train.step import Stepper, loss_and_hits

__all__ = ["epoch_plan", "train"]

EventFn = Callable[[dict[str, Any]], None]
GPU_CACHE_MAX_BYTES = 8 << 30  # "auto" keeps the decoded set on the GPU up to this size (and ¼ of free memory)
_KEEP_CHECKPOINTS = 3


def epoch_plan(seed: int, epoch: int, n: int, steps: int, global_batch: int, aug: AugmentConfig) -> tuple[Any, Any]:
    """Batch indices (steps, G) and augmentation matrices (steps, G, 2, 3) of one epoch, on the CPU."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(n, generator=g)[: steps * global_batch].view(steps, global_batch)
    theta = draw_thetas(steps * global_batch, aug, g).view(steps, global_batch, 2, 3)
    return perm, theta


def train(cfg: TrainConfig, on_event: EventFn | None = None) -> TrainResult:
    """Train as configured; under torchrun, every rank calls this and rank 0 writes the outputs."""
    cfg.validate()
    info = distributed.setup(cfg.device)
    try:
        result = _Run(cfg, info, on_event or (lambda _e: None)).run()
        # Every rank waits here until rank 0 has written its outputs, so all tear the group down together
        # (distributed.cleanup says why the teardown needs care).
        distributed.barrier(info)
        return result
    finally:
        distributed.cleanup(info)


class _Run:
    def __init__(self, cfg: TrainConfig, info: distributed.DistInfo, on_event: EventFn) -> None:
        import torch

        self.cfg, self.info, self.emit = cfg, info, on_event
        self.device = torch.device(info.device)
        self.notes: list[str] = []
        self.stop_requested = False
        if self.device.type == "cuda":
            torch.backends.cudnn.benchmark = True  # fixed shapes: let cuDNN pick its fastest kernels once
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.run_dir = self._run_dir()  # before the decode: a bad --resume/--out fails at once
        t0 = time.perf_counter()
        workers = cfg.workers or max(1, min(16, (_cpu_count() // max(1, _local_world()))))
        self.data: FolderData = load_folder(cfg.data, cfg.image_size, cfg.val_fraction, cfg.seed, workers)
        self.decode_s = time.perf_counter() - t0
        self.emit(
            {
                "kind": "data",
                "train": len(self.data.train),
                "val": len(self.data.val),
                "skipped": self.data.skipped_count,
                "decode_s": self.decode_s,
            }
        )
        if info.is_main:
            outputs.write_json(self.run_dir / "settings.json", {**cfg.to_dict(), "world_size": info.world_size})
        self._setup_model()
        self._setup_batches()

    # -- setup ---------------------------------------------------------------------------------------------
    def _run_dir(self) -> Path:
        cfg = self.cfg
        if cfg.resume and cfg.out is None:
            raise ConfigError("--resume needs --out RUN_DIR, the run to continue")
        name = str(cfg.out) if cfg.out else f"runs/{cfg.model}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
        if self.info.distributed:  # every rank must agree on the folder rank 0 chose
            import torch.distributed as dist

            box = [name]
            dist.broadcast_object_list(box, src=0)
            name = box[0]
        path = Path(name)
        if self.info.is_main:
            try:
                (path / "checkpoints").mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the run folder {path}: {exc.strerror or exc}",
                                  hint="give a writable --out") from exc  # fmt: skip
        return path

    def _setup_model(self) -> None:
        import torch

        cfg, cuda = self.cfg, self.device.type == "cuda"
        torch.manual_seed(cfg.seed)
        self.num_classes = len(self.data.classes)
        self.net = build_model(cfg.model, cfg.image_size, self.num_classes)
        if cfg.weights:
            self._load_pretrained(cfg.weights)
        self.net.to(self.device)
        if cfg.channels_last:
            self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        amp = cfg.amp
        if amp == "fp16" and not cuda:
            raise ConfigError("--amp fp16 needs a GPU (its loss scaler is CUDA's)", hint="use --amp bf16 or off")
        if amp == "auto":
            amp = "bf16" if cuda and torch.cuda.is_bf16_supported() else "off"
        self.amp = amp
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
        self.scaler = torch.amp.GradScaler("cuda") if amp == "fp16" else None
        # fused Adam: one kernel for the whole update; capturable keeps its step counter on the GPU (graph-safe)
        extra = {"fused": True, "capturable": True} if cuda else {}
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.lr, **extra)  # type: ignore[arg-type]

    def _load_pretrained(self, path: Path) -> None:
        import torch

        if not Path(path).is_file():
            raise ConfigError(f"weights file {path} does not exist", hint="pretrained weights come from a local file")
        if str(path).endswith(".safetensors"):
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
        own = self.net.state_dict()
        usable = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
        self.net.load_state_dict(usable, strict=False)
        self.notes.append(f"loaded {len(usable)} of {len(own)} tensors from {path} (the rest, e.g. the head, fresh)")

    def _setup_batches(self) -> None:
        import torch

        cfg, world = self.cfg, self.info.world_size
        n = len(self.data.train)
        self.batch = cfg.batch_size
        if n < self.batch * world:
            self.batch = max(1, n // world)
            self.notes.append(f"batch size lowered to {self.batch}: only {n} training images")
        self.global_batch = self.batch * world
        self.steps = n // self.global_batch  # the last partial batch is dropped: every step has one shape
        self.images, self.labels, self.cache = self._place(self.data.train.images, self.data.train.labels)
        self.stepper = Stepper(self.net, self.optimizer, self.images, self.labels, self.steps, self.batch,
                               self.device, self.amp_dtype, cfg.channels_last, self.scaler)  # fmt: skip
        self.model: torch.nn.Module = self.net
        if cfg.compile:
            self.model = torch.compile(self.net)  # type: ignore[assignment]
        if self.info.distributed:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = DDP(self.model, device_ids=ids, gradient_as_bucket_view=True)
        self.stepper.model = self.model

    def _place(self, images_np: Any, labels_np: Any) -> tuple[Any, Any, str]:
        import torch

        images, labels = torch.from_numpy(images_np), torch.from_numpy(labels_np)
        if self.device.type != "cuda":
            return images, labels, "cpu"
        mode = self.cfg.cache
        if mode == "auto":
            free, _total = torch.cuda.mem_get_info(self.device)
            mode = "gpu" if images.numel() <= min(GPU_CACHE_MAX_BYTES, free // 4) else "cpu"
        if mode == "gpu":
            return images.to(self.device), labels.to(self.device), "gpu"
        return images.pin_memory(), labels, "cpu"

    def _want_graph(self) -> bool:
        cfg = self.cfg
        return (cfg.cuda_graphs and self.device.type == "cuda" and self.cache == "gpu" and not self.info.distributed
                and not cfg.compile and self.amp != "fp16" and self.steps >= 4)  # fmt: skip

    # -- the run -------------------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        from gpukit.train.resume import resume_state

        start_epoch, start_step, carried, history, resumed = resume_state(self)
        self.history: list[EpochMetrics] = history
        self.result = self._result(resumed)
        old = self._install_signals()
        try:
            graph_pending = self._want_graph()
            for epoch in range(start_epoch, self.cfg.epochs):
                self._load_plan(epoch, start_step if epoch == start_epoch else 0)
                if graph_pending:
                    graph_pending = False
                    self._capture()
                metrics = self._epoch(epoch, start_step if epoch == start_epoch else 0, carried)
                carried = (0.0, 0, 0)
                if metrics is None:  # stopped by a signal; a checkpoint was saved
                    self.result.interrupted = True
                    break
                self.history.append(metrics)
                self.emit({"kind": "epoch", "metrics": metrics})
                self._save_epoch(epoch + 1, metrics)
        finally:
            self._restore_signals(old)
        self.result.epochs = self.history
        self.result.notes = self.notes
        if self.info.is_main:
            self._write_summary()
        return self.result

    def _result(self, resumed: str | None) -> TrainResult:
        return TrainResult(
            run_dir=self.run_dir, classes=self.data.classes, model=self.cfg.model, device=str(self.device),
            world_size=self.info.world_size, amp=self.amp, cache=self.cache, cuda_graphs=False,
            train_images=len(self.data.train), val_images=len(self.data.val),
            skipped_files=self.data.skipped_count, decode_s=self.decode_s, epochs=[], resumed_from=resumed,
        )  # fmt: skip

    def _load_plan(self, epoch: int, start_step: int) -> None:
        n = len(self.data.train)
        perm, theta = epoch_plan(self.cfg.seed, epoch, n, self.steps, self.global_batch, self.cfg.augment)
        lo, hi = self.info.rank * self.batch, (self.info.rank + 1) * self.batch
        self.stepper.load_epoch(perm[:, lo:hi], theta[:, lo:hi], start_step)

    def _capture(self) -> None:
        try:
            self.stepper.capture()
            self.result.cuda_graphs = True
        except Exception as exc:  # a model or op that cannot be captured: the eager step is the same training
            self.notes.append(f"CUDA graph capture failed, running eagerly: {type(exc).__name__}: {exc}")

    def _epoch(self, epoch: int, start_step: int, carried: tuple[float, int, int]) -> EpochMetrics | None:
        import torch

        self.model.train()
        sampler = UtilSampler((self.device.index or 0) if self.device.type == "cuda" else None)
        sampler.start()
        self.stepper.data_wait_s = 0.0
        t0 = time.perf_counter()
        for step in range(start_step, self.steps):
            self.stepper.step()
            if (step + 1) % self.cfg.log_every == 0:
                self.emit(
                    {
                        "kind": "step",
                        "epoch": epoch + 1,
                        "step": step + 1,
                        "steps": self.steps,
                        "images_per_s": (step + 1 - start_step) * self.global_batch / (time.perf_counter() - t0),
                        "data_wait_s": self.stepper.data_wait_s,
                        "gpu_util_pct": sampler.mean(),
                    }
                )
            if self._should_stop(step):
                self._save_interrupted(epoch, step + 1, carried)
                sampler.stop()
                return None
        loss_sum, hits = self.stepper.read_and_reset()  # host sync: the epoch's work is done when this returns
        epoch_s = time.perf_counter() - t0
        util = sampler.stop()
        sums = torch.tensor([loss_sum, float(hits)], dtype=torch.float64, device=self.device)  # NCCL: device tensors
        distributed.all_reduce_sum(sums, self.info)
        seen = self.steps * self.global_batch
        total_loss, total_hits = sums[0].item() + carried[0], sums[1].item() + carried[1]
        val_loss, val_acc = self._evaluate()
        images = (self.steps - start_step) * self.global_batch
        return EpochMetrics(epoch + 1, total_loss / seen, total_hits / seen, val_loss, val_acc, images, epoch_s,
                            images / epoch_s, self.stepper.data_wait_s, util)  # fmt: skip

    def _evaluate(self) -> tuple[float | None, float | None]:
        import torch

        val = self.data.val
        if len(val) == 0:
            return None, None
        from gpukit.train.augment import to_float

        self.net.eval()
        sums = torch.zeros(3, dtype=torch.float64, device=self.device)
        idx = torch.arange(self.info.rank, len(val), self.info.world_size)
        with torch.no_grad():
            for chunk in idx.split(512):
                x = to_float(torch.from_numpy(val.images[chunk.numpy()]).to(self.device))
                y = torch.from_numpy(val.labels[chunk.numpy()]).to(self.device)
                if self.cfg.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
                    logits = self.net(x)
                loss, hits = loss_and_hits(logits, y)
                sums += torch.stack([loss.double() * len(chunk), hits.double(), torch.tensor(len(chunk)).double()
                                     .to(self.device)])  # fmt: skip
        self.net.train()
        distributed.all_reduce_sum(sums, self.info)
        return sums[0].item() / sums[2].item(), sums[1].item() / sums[2].item()

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
        if (step + 1) % 20 and step + 1 != self.steps:
            return False
        # ranks must agree, or one would wait forever in the next all-reduce: check together every 20 steps
        import torch

        flag = torch.tensor([1.0 if self.stop_requested else 0.0], device=self.device)
        distributed.all_reduce_sum(flag, self.info)
        return bool(flag.item() > 0)

    # -- checkpoints and outputs ---------------------------------------------------------------------------
    def _state(self, epoch: int, step: int, carried: tuple[float, int, int]) -> dict[str, Any]:
        return {
            "epoch": epoch, "step": step, "steps_per_epoch": self.steps, "global_batch": self.global_batch,
            "seed": self.cfg.seed, "model": self.cfg.model, "image_size": self.cfg.image_size,
            "classes": self.data.classes, "carried": list(carried),
            "history": [m.to_dict() for m in self.history], "saved_at": datetime.now(UTC).isoformat(),
        }  # fmt: skip

    def _save_full(self, epoch: int, step: int, carried: tuple[float, int, int]) -> None:
        if not self.info.is_main:
            return
        tensors = {f"model.{k}": v for k, v in self.net.state_dict().items()}
        tensors.update(checkpoint.optimizer_tensors(self.optimizer))
        folder = self.run_dir / "checkpoints"
        checkpoint.save(folder, f"ckpt-e{epoch:05d}-s{step:07d}", tensors, self._state(epoch, step, carried))
        for old in checkpoint.list_checkpoints(folder)[_KEEP_CHECKPOINTS:]:
            old.with_suffix(".safetensors").unlink(missing_ok=True)
            old.unlink(missing_ok=True)

    def _save_interrupted(self, epoch: int, step: int, carried: tuple[float, int, int]) -> None:
        import torch

        loss_sum, hits = self.stepper.read_and_reset()
        sums = torch.tensor([loss_sum, float(hits)], dtype=torch.float64, device=self.device)  # NCCL: device tensors
        distributed.all_reduce_sum(sums, self.info)
        self._save_full(epoch, step, (sums[0].item() + carried[0], int(sums[1].item()) + carried[1], 0))
        self.notes.append(f"stopped by a signal at epoch {epoch + 1}, step {step}; resume with --resume")
        if self.info.is_main:
            outputs.append_log(self.run_dir / "train.log", self.notes[-1])

    def _save_epoch(self, epochs_done: int, metrics: EpochMetrics) -> None:
        self._save_full(epochs_done, 0, (0.0, 0, 0))
        if not self.info.is_main:
            return
        weights = {k: v for k, v in self.net.state_dict().items()}
        meta = {
            "model": self.cfg.model,
            "image_size": self.cfg.image_size,
            "classes": self.data.classes,
            "epoch": epochs_done,
            "val_accuracy": metrics.val_accuracy,
            "train_accuracy": metrics.train_accuracy,
        }
        checkpoint.save(self.run_dir, "last", weights, meta)
        best = max((_score(m) for m in self.history), default=0.0)
        if _score(metrics) >= best:
            checkpoint.save(self.run_dir, "best", weights, meta)
        outputs.write_metrics_csv(self.run_dir / "metrics.csv", self.history)
        outputs.append_log(self.run_dir / "train.log", outputs.epoch_line(metrics))

    def _write_summary(self) -> None:
        outputs.write_metrics_csv(self.run_dir / "metrics.csv", self.history)
        if self.history:
            outputs.write_curve(self.run_dir / "curve.png", self.result)
        outputs.write_json(self.run_dir / "summary.json", self.result.to_dict())


def _score(m: EpochMetrics) -> float:
    """What "best" ranks: validation accuracy, or training accuracy when there is no validation set (a validation
    accuracy of 0.0 is a score, not a missing one)."""
    return m.val_accuracy if m.val_accuracy is not None else m.train_accuracy


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _local_world() -> int:
    import os

    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
