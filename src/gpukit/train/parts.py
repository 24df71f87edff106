"""A run's working parts, built once: the run folder, the device, the network, its optimizer and the stepper.

``build_parts`` turns a config and the decoded data into :class:`Parts`; the loop (``loop.py``) only runs epochs
over them. Nothing here trains: building is setup time in the run's wall-time split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError
from gpukit.train import distributed
from gpukit.train.adam import Adam
from gpukit.train.config import TrainConfig
from gpukit.train.data import FolderData
from gpukit.train.models import build_model
from gpukit.train.step import Stepper

if TYPE_CHECKING:
    import torch

__all__ = ["GPU_CACHE_MAX_BYTES", "Parts", "build_parts", "make_run_dir"]

GPU_CACHE_MAX_BYTES = 8 << 30  # "auto" keeps the decoded set on the GPU up to this size (and ¼ of free memory)


@dataclass
class Parts:
    device: torch.device
    net: torch.nn.Module  # the bare network: checkpoints and validation use it
    model: torch.nn.Module  # what the step calls: the network, compiled and/or wrapped in DDP
    optimizer: Adam
    stepper: Stepper
    amp: str  # bf16, fp16 or off, as resolved
    cache: str  # gpu or cpu: where the decoded training set lives
    batch: int  # per process
    global_batch: int
    steps: int  # optimizer steps an epoch
    notes: list[str] = field(default_factory=list)

    @property
    def amp_dtype(self) -> Any:
        import torch

        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.amp)


def make_run_dir(cfg: TrainConfig, info: distributed.DistInfo) -> Path:
    """The run folder (rank 0 creates it and its checkpoints/); every rank agrees on the name rank 0 chose."""
    if cfg.resume and cfg.out is None:
        raise ConfigError("--resume needs --out RUN_DIR, the run to continue")
    name = str(cfg.out) if cfg.out else f"runs/{cfg.model}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    if info.distributed:
        import torch.distributed as dist

        box = [name]
        dist.broadcast_object_list(box, src=0)
        name = box[0]
    path = Path(name)
    if info.is_main:
        try:
            (path / "checkpoints").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the run folder {path}: {exc.strerror or exc}",
                              hint="give a writable --out") from exc  # fmt: skip
    return path


def build_parts(cfg: TrainConfig, info: distributed.DistInfo, data: FolderData) -> Parts:
    import torch

    device = torch.device(info.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark  # fixed shapes: cuDNN may time its kernels once
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    notes: list[str] = []
    torch.manual_seed(cfg.seed)
    net = build_model(cfg.model, cfg.image_size, len(data.classes))
    if cfg.weights:
        notes.append(_load_pretrained(net, cfg.weights))
    net.to(device)
    if cfg.channels_last:
        net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    amp = cfg.amp
    if amp == "fp16" and not cuda:
        raise ConfigError("--amp fp16 needs a GPU (its loss scaler is CUDA's)", hint="use --amp bf16 or off")
    if amp == "auto":
        amp = _auto_amp(device)
        if amp == "bf16" and not cuda:
            notes.append("bf16 autocast on the CPU: its AMX units train this way in about 0.6 of the fp32 time; "
                         "--amp off trains in fp32")  # fmt: skip
    scaler = torch.amp.GradScaler("cuda") if amp == "fp16" else None
    # fused Adam: one kernel for the whole update; capturable keeps its step counter on the GPU (graph-safe), and
    # its lr is a device tensor the step sets from the schedule (step.py)
    if cuda:
        lr: Any = torch.tensor(cfg.lr, dtype=torch.float32, device=device)
        optimizer = Adam(net.parameters(), lr=lr, weight_decay=cfg.weight_decay, fused=True, capturable=True)
    else:
        optimizer = Adam(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    world, n = info.world_size, len(data.train)
    batch = cfg.batch_size
    if n < batch * world:
        batch = max(1, n // world)
        notes.append(f"batch size lowered to {batch}: only {n} training images")
    global_batch = batch * world
    steps = n // global_batch  # the last partial batch is dropped: every step has one shape
    images, labels, cache = _place(cfg, device, data.train.images, data.train.labels)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    stepper = Stepper(net, optimizer, images, labels, steps, batch, device, amp_dtype, cfg.channels_last, scaler,
                      cfg.label_smoothing)  # fmt: skip
    model: torch.nn.Module = net
    if cfg.compile:
        model = torch.compile(net)  # type: ignore[assignment]
    if info.distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[device.index] if cuda else None, gradient_as_bucket_view=True)
    stepper.model = model
    return Parts(device, net, model, optimizer, stepper, amp, cache, batch, global_batch, steps, notes)


def _auto_amp(device: torch.device) -> str:
    """``--amp auto``: bf16 on a GPU that has it and on a CPU with AMX (oneDNN's bf16 kernels are faster than fp32
    only there: hardware/cpu.py), fp32 elsewhere."""
    import torch

    from gpukit.hardware.cpu import amx_bf16_usable

    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "off"
    return "bf16" if device.type == "cpu" and amx_bf16_usable() else "off"


def _load_pretrained(net: torch.nn.Module, path: Path) -> str:
    import torch

    if not Path(path).is_file():
        raise ConfigError(f"weights file {path} does not exist", hint="pretrained weights come from a local file")
    try:
        if str(path).endswith(".safetensors"):
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # safetensors and torch.load raise many types for a file that is not weights
        raise ConfigError(f"cannot read weights from {path}: {type(exc).__name__}",
                          hint="give a safetensors file or a torch state dict") from exc  # fmt: skip
    if not isinstance(state, dict):
        raise ConfigError(f"{path} holds no state dict", hint="give a safetensors file or a torch state dict")
    own = net.state_dict()
    usable = {k: v for k, v in state.items() if k in own and getattr(v, "shape", None) == own[k].shape}
    net.load_state_dict(usable, strict=False)
    return f"loaded {len(usable)} of {len(own)} tensors from {path} (the rest, e.g. the head, fresh)"


def _place(cfg: TrainConfig, device: torch.device, images_np: Any, labels_np: Any) -> tuple[Any, Any, str]:
    import torch

    images, labels = torch.from_numpy(images_np), torch.from_numpy(labels_np)
    if device.type != "cuda":
        return images, labels, "cpu"
    mode = cfg.cache
    if mode == "auto":
        free, _total = torch.cuda.mem_get_info(device)
        mode = "gpu" if images.numel() <= min(GPU_CACHE_MAX_BYTES, free // 4) else "cpu"
    if mode == "gpu":
        return images.to(device), labels.to(device), "gpu"
    return images.pin_memory(), labels, "cpu"
