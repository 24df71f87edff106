"""Settings of the inference server, one field per `gpukit serve` flag."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gpukit.errors import ConfigError
from gpukit.hardware.cpu import cpu_budget_of, cpu_quota, usable_cpus
from gpukit.serve.decode import nvimgcodec_unavailable
from gpukit.serve.engines import ENGINES

__all__ = [
    "AUTO_WORKERS_MAX",
    "BATCH_DECODERS",
    "CUDA_ENGINE",
    "DECODERS",
    "PIL_SIDE",
    "ServeConfig",
    "auto_workers",
    "resolve_auto",
]

# --decode values whose JPEGs the model process decodes per batch (pil: Pillow in the HTTP processes)
BATCH_DECODERS = ("nvjpeg", "nvimgcodec", "nvimgcodec-hw")
DECODERS = ("auto", "pil", *BATCH_DECODERS)
# `gpukit serve`'s engine on CUDA when none is asked for: the fastest that passes the accuracy gate. Once the batches'
# preparation stopped being the slower stage, torch.compile served ResNet-50 1.22-1.28x eager over HTTP on an H200
# (11,977 against 9,338-9,852 req/s, benchmarks/serve-pipe_h200_2026-12-04.md). On a CPU eager: compile costs more
# at start than it gains there (benchmarks/serve-engine_cpu_2026-12-02.md). `predict` and `export` keep eager.
CUDA_ENGINE = "auto"
# `--decode auto` on CUDA: Pillow in the HTTP processes for a model input of at most this many pixels a side, nvJPEG
# in the model process above it (see ``resolve_auto``)
PIL_SIDE = 64
# `--workers 0` (the default) on CUDA: one HTTP process per two CPUs, at most this many. On an H100 host with 16 CPUs
# one process (HTTP and model together) served 3.1-3.8x less than 8 (seed CNN 3,686 against 14,177 req/s, ResNet-50
# 3,572 against 11,939; benchmarks/serve-workers_h100_2026-12-07.md); 8 is what every serving record since 2026-12-04
# ran, and 16 served more only on hosts whose cores slow down under load (docs/serve.md, How many HTTP workers)
AUTO_WORKERS_MAX = 8


@dataclass
class ServeConfig:
    model: Path  # a run folder or a checkpoint's .json / .safetensors (never taken from a request)
    device: str = "auto"  # cpu, cuda, auto
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 0  # HTTP front-end processes; 1 = HTTP and model in one process, N > 1 = N feeding one model
    # process; 0: chosen by ``resolve_auto`` (``auto_workers`` on CUDA, 1 on a CPU)
    max_batch: int = 64
    max_wait_ms: float = 2.0
    queue_size: int = 1024  # requests admitted at once (reading, decoding, queued, running); more get 503
    timeout_s: float = 10.0  # a request not answered by then gets 504 and its work is dropped
    api_key_env: str | None = None  # name of the environment variable holding the API key
    max_body_mb: float = 8.0
    max_pixels: int = 16_777_216  # width × height above this is refused before decoding (docs/serve.md says why)
    decode_memory_mb: float = 512.0  # decoded pixels held at once per HTTP process; one request at most half
    amp: str = "off"  # off (the same numbers as `gpukit predict`) or bf16 (autocast on CUDA)
    cuda_graphs: bool = True  # capture one graph per padded batch size on CUDA
    # pil: Pillow in the HTTP processes; the BATCH_DECODERS: JPEGs decoded per batch in the model process; auto:
    # nvjpeg on CUDA (pil for a model input of at most PIL_SIDE px), pil on a CPU (``resolve_auto``)
    decode: str = "auto"
    decode_threads: int = 0  # threads decoding images per HTTP process; 0 = chosen from the CPU count
    engine: str | None = None  # auto, eager, compile, tensorrt (gpukit.serve.engines); None: CUDA_ENGINE on CUDA,
    # eager on a CPU (``resolve_auto``)
    gate_images: Path | None = None  # the accuracy gate's images (else the run's validation split, else synthetic)
    model_cpus: int = 0  # CPUs the model process keeps to itself, the HTTP workers taking the rest; 0: the system
    # places them (gpukit.serve.cpus)

    def validate(self) -> ServeConfig:
        checks = [
            (self.workers >= 0, "--workers must be 0 (chosen for this machine) or more"),
            (1 <= self.max_batch <= 4096, "--max-batch must be between 1 and 4096"),
            (0 <= self.max_wait_ms <= 10_000, "--max-wait-ms must be between 0 and 10000"),
            (self.queue_size >= 1, "--queue-size must be at least 1"),
            (self.timeout_s > 0, "--timeout-s must be positive"),
            (0 < self.max_body_mb <= 1024, "--max-body-mb must be in (0, 1024]"),
            (self.max_pixels >= 1, "--max-pixels must be at least 1"),
            (1 <= self.decode_memory_mb <= 1024 * 1024, "--decode-memory-mb must be in [1, 1048576]"),
            (0 <= self.decode_threads <= 256, "--decode-threads must be in 0..256"),
            (0 <= self.port <= 65535, "--port must be in 0..65535"),
            (0 <= self.model_cpus <= 4096, "--model-cpus must be in 0..4096"),
            (self.amp in ("off", "bf16"), "--amp must be off or bf16"),
            (self.decode in DECODERS, f"--decode must be one of {', '.join(DECODERS)}"),
            (self.engine in (None, *ENGINES), f"--engine must be one of {', '.join(ENGINES)}"),
            (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:"), "--device: cpu, cuda or auto"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        return self

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    @property
    def decode_memory_bytes(self) -> int:
        return int(self.decode_memory_mb * 1024 * 1024)

    @property
    def max_wait_s(self) -> float:
        return self.max_wait_ms / 1000.0


def resolve_auto(config: ServeConfig) -> ServeConfig:
    """What "auto" and "not given" mean, made concrete before any process starts (the HTTP processes must know where
    JPEGs go; the start-up line names the engine asked for).

    - No ``--engine``: ``CUDA_ENGINE`` on CUDA, eager on a CPU.
    - ``--decode auto``: the fastest decoder measured through gpukit's pipeline on an H200. For a model input over
      ``PIL_SIDE`` px, nvJPEG through torchvision in the model process (ResNet-50 224 px, 256 clients: 7,312-8,148
      req/s against nvImageCodec's hybrid 5,048-5,868, its hardware engines 4,261-4,698 and Pillow's 4,735-4,816,
      benchmarks/serve-decode_h200_2026-12-02.md). Up to it, Pillow in the HTTP processes: since the small JPEGs
      are decoded on the workers' loops, the seed CNN 64 px served more with Pillow in every side-by-side run on
      the H200 of 2026-12-04 (11,380 and 11,433 against nvJPEG's 10,680 and 9,560 req/s on one host, 10,664 against
      9,009 on another: benchmarks/serve-pipe_h200_2026-12-04.md, serve-engine-default_h200_2026-12-04.md), and it
      keeps ``gpukit predict``'s exact numbers. On a CPU Pillow.
    - ``--workers 0``: ``auto_workers`` on CUDA, 1 on a CPU (where the model's own threads need the cores).

    A named nvImageCodec decoder that is not installed is a ``ConfigError``."""
    if config.decode.startswith("nvimgcodec") and (why := nvimgcodec_unavailable()):
        raise ConfigError(f"--decode {config.decode}: {why}", hint="or --decode nvjpeg / pil")
    cuda = (config.engine is None or config.decode == "auto" or config.workers == 0) and _cuda(config.device)
    if config.workers == 0:
        config = replace(config, workers=auto_workers(config.model_cpus, usable_cpus(), cpu_quota()) if cuda else 1)
    if config.engine is None:
        config = replace(config, engine=CUDA_ENGINE if cuda else "eager")
    if config.decode == "auto":
        side = _input_side(config.model) if cuda else None
        config = replace(config, decode="nvjpeg" if cuda and (side is None or side > PIL_SIDE) else "pil")
    return config


def auto_workers(model_cpus: int, cpus: tuple[int, ...] | None, quota: int | None = None) -> int:
    """HTTP processes for a CUDA server when ``--workers`` is not given: one per two of the CPUs this process may
    use (``cpus``, its affinity; None: the system's count; fewer where its cgroup's ``quota`` is lower), at most
    ``AUTO_WORKERS_MAX``, at least 1. With ``--model-cpus N`` at most the CPUs left to the workers, and at least 2
    (there is something to split)."""
    n = cpu_budget_of(cpus, quota)
    workers = min(AUTO_WORKERS_MAX, n // 2)
    if model_cpus:
        return max(2, min(workers, n - model_cpus))
    return max(1, workers)


def _input_side(model: Path) -> int | None:
    """The model's input size from its checkpoint's JSON (no torch); None when it cannot be read here (the model
    process then reports why it cannot load it)."""
    from gpukit.train.predict import read_meta

    try:
        return int(read_meta(model)["image_size"])
    except (ConfigError, OSError, KeyError, TypeError, ValueError):
        return None


def _cuda(device: str) -> bool:
    if device.startswith("cuda"):
        return True
    if device == "cpu":
        return False
    import torch  # --device auto: does this machine have a GPU? (the model process decides the same way)

    return bool(torch.cuda.is_available())
