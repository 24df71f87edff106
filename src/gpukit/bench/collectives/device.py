"""What torch.distributed can run on a device here (imported by the collectives and by scaling, so neither imports
the other)."""

from __future__ import annotations

__all__ = ["device_state"]


def device_state(device: str) -> tuple[int, str | None]:
    """(GPUs torch sees, why this device cannot run collectives here or None)."""
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        return 0, "torch was built without torch.distributed"
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device == "cuda":
        if gpus == 0:
            return 0, "no CUDA GPU that torch can see"
        if not dist.is_nccl_available():
            return gpus, "torch was built without NCCL"
        return gpus, None
    return gpus, None if dist.is_gloo_available() else "torch was built without gloo"
