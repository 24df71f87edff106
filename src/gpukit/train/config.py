"""Typed settings and results of a training run; CLI flags map onto ``TrainConfig`` one to one."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError
from gpukit.train.augment import AugmentConfig
from gpukit.train.models import DEFAULT_MODEL, MODEL_NAMES
from gpukit.train.schedule import SCHEDULES

__all__ = ["EpochMetrics", "TrainConfig", "TrainResult", "WallTimes"]

CACHE_MODES = ("auto", "gpu", "cpu")
AMP_MODES = ("auto", "bf16", "fp16", "off")


@dataclass
class TrainConfig:
    data: Path
    model: str = DEFAULT_MODEL
    epochs: int = 25  # the seed's
    batch_size: int = 32  # per process; the global batch is batch_size × world size
    image_size: int = 64  # the seed's
    lr: float = 2e-3  # Adam (AdamW with the weight decay); the seed used Keras' 1e-3
    weight_decay: float = 0.05  # decoupled (AdamW); 0 is the seed's plain Adam
    label_smoothing: float = 0.1  # share of each target spread over the classes; 0 is the seed's plain loss
    device: str = "auto"
    seed: int = 0
    out: Path | None = None
    resume: bool = False
    val_fraction: float = 0.2
    workers: int | None = None  # decode processes; default: the CPU count (shared among local ranks)
    cache: str = "auto"  # where the decoded uint8 set lives: gpu, cpu (pinned), auto (gpu when it fits)
    amp: str = "auto"  # auto: bf16 on a GPU that has it and on a CPU with AMX, else off (parts.py)
    channels_last: bool = True
    compile: bool = False  # torch.compile the model
    cuda_graphs: bool = True  # capture the whole training step in a CUDA graph (one process, GPU cache)
    # let cuDNN time its kernels for the fixed shapes first: off by default, as it cost 0.3-1.1 s of start-up and
    # gained nothing on the seed CNN on an H200 (77,209 vs 77,041 img/s at batch 32; benchmarks/train_h200_*)
    cudnn_benchmark: bool = False
    weights: Path | None = None  # local pretrained weights (safetensors or a torch state dict)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    log_every: int = 50  # steps between progress events
    # at least this many optimizer steps: a small set gets more epochs (schedule.py). A few hundred images trained
    # from scratch memorise first and generalise only later: circles vs squares at random places, colours and sizes
    # were at chance after 400 steps and 96 % held out after 2,000 (benchmarks/train-recipe_*-run2). 4-8 px objects
    # kept improving up to 3,600 (0.950 at 1,200, 0.970 at 3,600 on separately generated sets), which the narrower
    # small-cnn (models.py) fits in a 2-core CPU's 5 minutes (benchmarks/train-recipe-screen_h200_2026-12-03.md)
    min_steps: int = 3600
    schedule: str = "cosine"  # learning rate: warm-up then cosine decay; one-cycle; constant (the seed's)
    warmup: float = 0.05  # share of the steps spent warming up (cosine)
    min_delta: float = 1e-3  # "best" needs a validation loss lower by more than this; ties go to the earlier epoch
    patience: int = 0  # stop after this many epochs without such an improvement; 0 = never stop early
    val_every: int = 0  # validate every N epochs (and the first and last); 0: about every 30 steps (selection.py)
    checkpoint_every_s: float = 30.0  # checkpoints after an epoch at most this often, and at the end (saving.py)

    def validate(self) -> None:
        if self.model not in MODEL_NAMES:
            raise ConfigError(f"unknown model {self.model!r}", hint=f"choose one of {', '.join(MODEL_NAMES)}")
        for name in ("epochs", "batch_size", "image_size", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("seed", "min_steps", "patience", "val_every"):
            if getattr(self, name) < 0:
                hint = "--seed takes a whole number from 0 to 2**63-1" if name == "seed" else None
                raise ConfigError(f"--{name.replace('_', '-')} must be 0 or more, not {getattr(self, name)}", hint=hint)
        if self.seed >= 2**63:
            raise ConfigError(f"--seed must be below 2**63, not {self.seed}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"unknown --schedule {self.schedule!r}", hint=f"choose one of {', '.join(SCHEDULES)}")
        if not 0 <= self.warmup < 1:
            raise ConfigError(f"--warmup must be a share in [0, 1), not {self.warmup}")
        if not self.min_delta >= 0:
            raise ConfigError(f"--min-delta must be 0 or more, not {self.min_delta}")
        if not 0 <= self.checkpoint_every_s <= 1e9:  # NaN fails too
            raise ConfigError(
                f"--checkpoint-every-s must be 0 (every epoch) to 1e9 seconds, not {self.checkpoint_every_s}"
            )
        self.augment.validate()
        if self.image_size < 16 and self.model != "seed-cnn":
            raise ConfigError(
                f"{self.model} needs --image-size of at least 16", hint="use --model seed-cnn for tiny images"
            )
        if self.cache not in CACHE_MODES:
            raise ConfigError(f"unknown --cache {self.cache!r}", hint=f"choose one of {', '.join(CACHE_MODES)}")
        if self.amp not in AMP_MODES:
            raise ConfigError(f"unknown --amp {self.amp!r}", hint=f"choose one of {', '.join(AMP_MODES)}")
        if not 0 <= self.val_fraction < 1:
            raise ConfigError("--val-fraction must be in [0, 1)")
        if not self.lr > 0:  # NaN too; Adam would raise a bare ValueError
            raise ConfigError(f"--lr must be positive, not {self.lr}")
        if not 0 <= self.weight_decay <= 1:
            raise ConfigError(f"--weight-decay must be in [0, 1], not {self.weight_decay}")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"--label-smoothing must be in [0, 1), not {self.label_smoothing}")

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
class WallTimes:
    """Where a run's wall time went, in seconds. ``startup_s`` is process start (the OS's record of it) →
    ``train()``: the interpreter and the CLI's imports (None when not in a process of its own); ``decode_s`` the
    image decode, during which torch and the CUDA context load on a thread (``preload.py``);
    ``imports_s`` the wait for those after the decode (what it did not hide); ``setup_s`` device, model and
    optimizer; ``capture_s`` CUDA graph capture (warm-up steps included) or torch.compile's first step;
    ``other_s`` what is left of ``total_s``."""

    startup_s: float | None = None
    decode_s: float = 0.0
    imports_s: float = 0.0
    setup_s: float = 0.0
    capture_s: float = 0.0
    train_s: float = 0.0
    validate_s: float = 0.0
    save_s: float = 0.0
    total_s: float = 0.0  # process start (or train() entry) → result

    @property
    def other_s(self) -> float:
        parts = (self.startup_s or 0.0, self.decode_s, self.imports_s, self.setup_s, self.capture_s, self.train_s,
                 self.validate_s, self.save_s)  # fmt: skip
        return max(0.0, self.total_s - sum(parts))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "other_s": self.other_s}


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
    warnings: list[str] = field(default_factory=list)  # things the user should act on (the recipe, the data)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason) of every skipped file
    best_epoch: int | None = None  # the epoch `best` holds: lowest validation loss (train loss without validation)
    planned_epochs: int = 0  # epochs after the step budget; fewer ran when stopped early or interrupted
    stopped_early: bool = False
    val_accuracy_mirrored: float | None = None  # the last model on the validation split mirrored left-right
    chance_accuracy: float | None = None  # the most common validation class's share: what guessing scores
    verdict: str = ""  # "generalised", "did not generalise" or "not checked: …" (selection.generalisation)
    times: WallTimes = field(default_factory=WallTimes)

    @property
    def best_val_accuracy(self) -> float | None:
        values = [e.val_accuracy for e in self.epochs if e.val_accuracy is not None]
        return max(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["run_dir"] = str(self.run_dir) if self.run_dir else None
        d["best_val_accuracy"] = self.best_val_accuracy
        d["times"] = self.times.to_dict()
        return d
