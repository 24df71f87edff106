"""Collectives, GPU↔GPU copies and DDP scaling through torch.distributed (`gpukit bench allreduce|…|p2p|scaling`).

    from gpukit.bench.collectives import CollectiveRequest, run_collectives

The request and the runner come from :mod:`.api` on first use: a worker process imports this package for its
hooks without loading the launcher.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpukit.bench.collectives.api import (
        CollectiveRequest,
        default_sizes,
        device_state,
        parse_sizes,
        run_collectives,
    )

__all__ = ["CollectiveRequest", "default_sizes", "device_state", "parse_sizes", "run_collectives"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("gpukit.bench.collectives.api"), name)
    globals()[name] = value
    return value
