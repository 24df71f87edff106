"""Test hooks, read from the environment of a rank, that make a rank misbehave on purpose.

``GPUKIT_TEST_CORRUPT_RANK=r``: rank r adds 1 to the first element of every buffer it contributes (a wrong
reduction, which the exact check must catch). ``GPUKIT_TEST_HANG_RANK=r``: rank r sleeps forever before its first
collective row (a hung rank, which the launcher's timeout must catch). ``GPUKIT_TEST_DIE_RANK=r``: rank r exits with
status 3 there (a dead rank). Unset, they cost one dictionary lookup.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["corrupt", "maybe_die_or_hang"]


def _rank_of(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def corrupt(buffer: Any, rank: int) -> None:
    if _rank_of("GPUKIT_TEST_CORRUPT_RANK") == rank and buffer.numel():
        buffer.view(-1)[0] += 1


def maybe_die_or_hang(rank: int) -> None:
    if _rank_of("GPUKIT_TEST_DIE_RANK") == rank:
        os._exit(3)
    if _rank_of("GPUKIT_TEST_HANG_RANK") == rank:
        while True:  # hung: only the launcher's timeout ends this
            time.sleep(3600)
