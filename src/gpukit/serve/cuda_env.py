"""The CUDA environment of a served model's process, set before CUDA starts there.

``CUDA_DEVICE_MAX_CONNECTIONS`` is how many hardware work queues the host has into the GPU (8 unless set; at most
32). Every stream maps onto one of them, and work in one queue runs in order whatever its stream, so two streams on
one queue wait for each other. The model process has more streams than 8 queues: the forward pass's, the staging
stream, torchvision's decoder stream and the 16 streams that nvJPEG's hardware decoder makes for itself (seen in
``benchmarks/json/serve-prep-profile_h200_2026-12-01.txt``). Measured on H200s with ResNet-50 bf16 and 224 px
JPEGs (``benchmarks/serve-pinned_h200_2026-12-04.md``): preparing 128 JPEGs beside a running forward pass took 47 ms
with 8 queues on one machine and 9.5 ms with 32 on another (5.0 and 4.8 ms with the GPU idle). Over HTTP (8 workers,
256 clients) ResNet-50 served 7,654 / 7,934 req/s with 8 and 7,746 / 8,525 with 32, alternating on one machine, and
7,531 against 8,105 on another; the seed CNN (64 clients) was level, 8,712 / 9,256 against 8,253 / 9,765. (An
earlier trial, together with a high-priority staging stream, read 9-11 % slower on a slower machine:
``serve-queues_h200_2026-12-03.md``.)

The value a user set is kept (``CUDA_DEVICE_MAX_CONNECTIONS=8 gpukit serve …`` restores the CUDA default).
The driver reads it when CUDA starts in the process, so ``set_cuda_queues`` runs before anything touches CUDA
(``gpukit serve`` calls it first; ``gpukit.serve.server.run`` again, for callers of the library).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["CUDA_QUEUES", "QUEUES_VAR", "set_cuda_queues"]

QUEUES_VAR = "CUDA_DEVICE_MAX_CONNECTIONS"
CUDA_QUEUES = 32  # the most the driver allows; see the module's docstring for what 8 cost


def set_cuda_queues(device: str, environ: MutableMapping[str, str] | None = None) -> str | None:
    """Ask for ``CUDA_QUEUES`` hardware queues in this process unless the user chose a number or the device is a
    CPU. Returns the value now in force (None: the driver's default, on a CPU device)."""
    env = os.environ if environ is None else environ
    if device == "cpu":
        return env.get(QUEUES_VAR)
    return env.setdefault(QUEUES_VAR, str(CUDA_QUEUES))
