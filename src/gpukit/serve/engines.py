"""The engines a served model can run on (``--engine``), applied to the network inside ``ModelRunner``.

- ``eager``: the network as PyTorch runs it (today's path: AMP and channels_last as ``--amp`` and the model say, one
  CUDA graph per padded batch size on CUDA).
- ``compile``: ``torch.compile`` with static shapes, one specialisation per padded batch size (the sizes
  ``ModelRunner.warm`` runs, so every one is compiled before the server is ready), in inductor's default mode, and
  on CUDA the runner captures its own CUDA graph of each compiled size, as it does for eager (inductor's own CUDA
  graphs live in per-thread trees, and the batcher replays on a thread other than the one that warmed). On an H200
  the default mode ran ResNet-50 bf16 at 20,486 / 22,842 img/s at batch 64 / 256, compiled in 21 / 15 s, where
  ``max-autotune-no-cudagraphs`` ran 19,324 at 64 after 266 s of autotuning. Inductor needs a
  C++ compiler on the CPU (``compile_unavailable`` says when there is none). Its cache lives beside the checkpoint
  (``TORCHINDUCTOR_CACHE_DIR``, unless that is set already), so a second start compiles from it.
- ``tensorrt``: ``torch_tensorrt`` (an optional extra, large and not installed by default): without it, a
  ``ConfigError`` with the install line.
- ``auto``: the fastest of the available engines that passes the accuracy gate (``gpukit.serve.choose``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError

__all__ = [
    "ENGINES",
    "TENSORRT_EXTRA",
    "compile_unavailable",
    "engine_net",
    "inductor_dir",
    "require_engine",
    "tensorrt_unavailable",
]

ENGINES = ("auto", "eager", "compile", "tensorrt")
TENSORRT_EXTRA = "pip install torch-tensorrt (the NVIDIA TensorRT wheels; a CUDA GPU is needed as well)"


def compile_unavailable(cuda: bool) -> str | None:
    """Why ``torch.compile`` cannot run here, or None: inductor builds C++ on a CPU and Triton kernels on CUDA."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if cuda:
        return None if importlib.util.find_spec("triton") is not None else "triton is not installed (inductor needs it)"
    cxx = os.environ.get("CXX") or "c++"
    if shutil.which(cxx) is None and shutil.which("g++") is None and shutil.which("clang++") is None:
        return f"no C++ compiler found ({cxx}, g++, clang++): inductor builds its CPU kernels with one"
    return None


def tensorrt_unavailable(cuda: bool) -> str | None:
    """Why the TensorRT engine cannot run here, or None."""
    if importlib.util.find_spec("torch_tensorrt") is None:
        return "torch_tensorrt is not installed"
    if not cuda:
        return "TensorRT runs on a CUDA GPU; the device here is a CPU"
    return None


def require_engine(engine: str, cuda: bool) -> None:
    """Raise ``ConfigError`` (exit 2) when the engine asked for by name cannot run here."""
    if engine not in ENGINES:
        raise ConfigError(f"--engine {engine!r} is not an engine", hint=f"choose one of {', '.join(ENGINES)}")
    if engine == "tensorrt" and (why := tensorrt_unavailable(cuda)):
        hint = TENSORRT_EXTRA if "installed" in why else "use --engine compile or eager on a CPU"
        raise ConfigError(f"--engine tensorrt: {why}", hint=hint)
    if engine == "compile" and (why := compile_unavailable(cuda)):
        raise ConfigError(f"--engine compile: {why}", hint="install a C++ compiler (g++), or use --engine eager")


def inductor_dir(checkpoint: Path) -> Path | None:
    """Where inductor keeps its compiled kernels for this checkpoint: ``TORCHINDUCTOR_CACHE_DIR`` when the user set
    it, else ``.gpukit-engine/inductor`` beside the checkpoint (set in the environment, which inductor reads);
    None when that cannot be made (inductor then uses its default)."""
    from gpukit.serve.engine_cache import cache_folder

    given = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if given and given != os.environ.get("_GPUKIT_INDUCTOR_DIR"):
        return Path(given)
    folder = cache_folder(checkpoint) / "inductor"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only volume: inductor's own default place
        return None
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.environ["_GPUKIT_INDUCTOR_DIR"] = str(folder)
    return folder


# inductor's mode on CUDA (see the module docstring); None is its default (no autotuning: faster here, and minutes
# less to build, than max-autotune-no-cudagraphs; benchmarks/serve-engine_h200_2026-12-02-run2.md)
CUDA_MODE: str | None = None


def engine_net(net: Any, engine: str, cuda: bool, sizes: int, checkpoint: Path | None = None) -> Any:
    """``net`` for ``engine`` (``eager``: itself); ``sizes`` is how many batch sizes it will see (one compiled
    specialisation each, so dynamo's limit of specialisations is raised to hold them all)."""
    if engine == "eager":
        return net
    require_engine(engine, cuda)
    if engine == "tensorrt":
        return _tensorrt(net)
    import torch

    if checkpoint is not None:
        inductor_dir(checkpoint)
    dynamo = torch._dynamo.config
    dynamo.recompile_limit = max(dynamo.recompile_limit, sizes + 2)
    return torch.compile(net, mode=CUDA_MODE if cuda else None, dynamic=False)


def _tensorrt(net: Any) -> Any:
    """TensorRT through torch_tensorrt's dynamo front end, compiled on first call per shape like ``compile``.
    Not run on any machine of this project (its wheels are not installed there): the accuracy gate decides."""
    import torch
    import torch_tensorrt  # noqa: F401  (registers the "tensorrt" backend)

    options: dict[str, Any] = {"enabled_precisions": {torch.float32, torch.bfloat16, torch.float16}}
    return torch.compile(net, backend="tensorrt", dynamic=False, options=options)
