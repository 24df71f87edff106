"""Collectives, GPU↔GPU copies and DDP scaling through torch.distributed (`gpukit bench allreduce|…|p2p|scaling`).

    from gpukit.bench.collectives import CollectiveRequest, run_collectives

The request and the runner come from :mod:`.api` on first use: a worker process imports this package for its
hooks without loading the launcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpukit.lazy import lazy_exports

if TYPE_CHECKING:
    from gpukit.bench.collectives.api import (
        CollectiveRequest,
        default_sizes,
        device_state,
        parse_sizes,
        run_collectives,
    )

__all__ = ["CollectiveRequest", "default_sizes", "device_state", "parse_sizes", "run_collectives"]


__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "gpukit.bench.collectives.api"))
