"""Joining and leaving the process group of one rank (from RANK / WORLD_SIZE / LOCAL_RANK / MASTER_*: set by the
launcher or by torchrun). NCCL on CUDA, gloo on the CPU; the group's own timeout is the user's ``--timeout``."""

from __future__ import annotations

import datetime
import os

__all__ = ["join", "leave"]


def join(device: str, timeout_s: float) -> str:
    """Join the group; returns this rank's device ("cpu" or "cuda:<local rank>")."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink SHARP off on lent machines (KINDS.md)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = datetime.timedelta(seconds=max(timeout_s, 1.0))
    if device == "cuda":
        torch.cuda.set_device(local)
        name = f"cuda:{local}"
        if not dist.is_initialized():
            dist.init_process_group("nccl", timeout=timeout, device_id=torch.device(name))
        return name
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timeout)
    return "cpu"


def leave() -> None:
    """Destroy the group while the interpreter is alive (see train.distributed.cleanup for why)."""
    import gc

    import torch.distributed as dist

    gc.collect()
    if dist.is_initialized():
        try:
            dist.barrier()
        finally:
            dist.destroy_process_group()
