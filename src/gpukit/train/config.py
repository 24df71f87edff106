"""Typed settings and results of a training run; CLI flags map onto ``TrainConfig`` one to one."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.train.augment import AugmentConfig
from gpukit.train.models import DEFAULT_MODEL, MODEL_NAMES

__all__ = ["EpochMetrics", "TrainConfig", "TrainResult"]

CACHE_MODES = ("auto", "gpu", "cpu")
AMP_MODES = ("auto", "bf16", "fp16", "off")


@dataclass
class TrainConfig:
    data: Path
    model: str = DEFAULT_MODEL
    epochs: int = 25  # the seed's
    batch_size: int = 32  # per process; the global batch is batch_size × world size
    image_size: int = 64  # the seed's
    lr: float = 1e-3  # Keras' Adam default, as the seed used it
    device: str = "auto"
    seed: int = 0
    out: Path | None = None
    resume: bool = False
    val_fraction: float = 0.2
    workers: int | None = None  # decode processes; default: the CPU count (shared among local ranks)
    cache: str = "auto"  # where the decoded uint8 set lives: gpu, cpu (pinned), auto (gpu when it fits)
    amp: str = "auto"  # auto: bf16 on a GPU that has it, off on the CPU
    channels_last: bool = True
    compile: bool = False  # torch.compile the model
    cuda_graphs: bool = True  # capture the whole training step in a CUDA graph (one process, GPU cache)
    weights: Path | None = None  # local pretrained weights (safetensors or a torch state dict)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    log_every: int = 50  # steps between progress events

    def validate(self) -> None:
        if self.model not in MODEL_NAMES:
            raise ConfigError(f"unknown model {self.model!r}", hint=f"choose one of {', '.join(MODEL_NAMES)}")
        for name in ("epochs", "batch_size", "image_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if self.image_size < 16 and self.model != "seed-cnn":
            raise ConfigError("ResNets need --image-size of at least 16", hint="use --model seed-cnn for tiny images")
        if self.cache not in CACHE_MODES:
            raise ConfigError(f"unknown --cache {self.cache!r}", hint=f"choose one of {', '.join(CACHE_MODES)}")
        if self.amp not in AMP_MODES:
            raise ConfigError(f"unknown --amp {self.amp!r}", hint=f"choose one of {', '.join(AMP_MODES)}")
        if not 0 <= self.val_fraction < 1:
            raise ConfigError("--val-fraction must be in [0, 1)")
        if not self.lr > 0:  # NaN too; Adam would raise a bare ValueError
            raise ConfigError(f"--lr must be positive, not {self.lr}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


@dataclass
class EpochMetrics:
    epoch: int  # 1-based
    train_loss: float
    train_accuracy: float
    val_loss: float | None
    val_accuracy: float | None
    images: int  # training images seen this epoch, all ranks together
    epoch_s: float
    images_per_s: float  # summed over ranks: global images / wall time of the epoch
    data_wait_s: float  # host time spent gathering and copying batches (≈ 0 with the GPU cache)
    gpu_util_pct: float | None  # NVML utilisation sampled over the epoch; None on the CPU or without NVML

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainResult:
    run_dir: Path | None
    classes: list[str]
    model: str
    device: str
    world_size: int
    amp: str
    cache: str
    cuda_graphs: bool
    train_images: int
    val_images: int
    skipped_files: int
    decode_s: float
    epochs: list[EpochMetrics]
    interrupted: bool = False
    resumed_from: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def best_val_accuracy(self) -> float | None:
        values = [e.val_accuracy for e in self.epochs if e.val_accuracy is not None]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["run_dir"] = str(self.run_dir) if self.run_dir else None
        d["best_val_accuracy"] = self.best_val_accuracy
        return d
