"""The CUDA environment of a served model's process, set before CUDA starts there.

``CUDA_DEVICE_MAX_CONNECTIONS`` is how many hardware work queues the host has into the GPU (8 unless set; at most
32). Every stream maps onto one of them, and work in one queue runs in order whatever its stream, so two streams on
one queue wait for each other. The model process has more streams than 8 queues: the forward pass's, the staging
stream, torchvision's decoder stream and the 16 streams that nvJPEG's hardware decoder makes for itself (seen in
``benchmarks/json/serve-prep-profile_h200_2026-12-01.txt``). Measured with 32 queues (ResNet-50 bf16, 224 px JPEGs,
H200, ``benchmarks/scripts/serve_prep_probe.py``, 2026-12-01, the model process alone): preparing 64 JPEGs took
2.9 ms alone and 4.9 ms beside a running forward pass, against 6.4 and 9.8 ms with 8 queues; 128 took 5.1 and 9.7
against 9.2 and 19.3 ms. Not yet shown: that the batcher gains as much (it read 9,383 against 8,893 img/s at max
batch 64, 9,909 against 9,740 at 128), and an HTTP run (its one run then, before the worker's pipe change, when the
pipes were the limit, read 6,694 against 7,157-7,324 req/s). ``benchmarks/scripts/serve_queues_h200.sh`` measures
both again, beside a server started with 8, and whether a decode waits for unrelated GPU work at all.

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
