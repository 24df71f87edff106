"""Which CPUs the processes of a several-process server run on (``--model-cpus N``): the model process keeps N to
itself, the HTTP workers share the others. 0 (the default) leaves placement to the system.

A ResNet-50 server on CUDA is paced by two threads of the model process: the one preparing batches (nvJPEG's host
work for each batch) and the one running them, which spins while it waits for the GPU. On a host whose CPUs are all
busy, the kernel put them on CPUs shared with each other and with other processes. Measured on an H100 host with 16
CPUs, 8 HTTP workers and `gpukit loadtest` (8 Python processes) on the same host, in turns
(benchmarks/serve-placement_h100_2026-12-06.md): with ``--model-cpus 4`` a batch of about 70 took 5.1-6.0 ms to
prepare against 7.2-8.8 ms, and the server answered 10,586-11,815 req/s against 9,351-9,939. With wrk (4 threads in
C) as the load beside it, the two placements served the same within their spread (10,732-11,201 against
10,360-12,021), and so did the seed CNN with either generator. So it helps where something else keeps the host's
CPUs busy, and it is not the default: placing by itself, every server on a host with one server per GPU would take the
same first CPUs.

The N CPUs are the first N of those this process may use (``gpukit.hardware.cpu.usable_cpus``, its affinity: start it
under ``taskset`` or in a cpuset to choose which, e.g. the GPU's NUMA node).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from gpukit.errors import ConfigError

__all__ = ["Split", "pin_process", "plan"]


@dataclass(frozen=True)
class Split:
    model: tuple[int, ...]  # the model process's CPUs
    workers: tuple[int, ...]  # every HTTP worker's

    def describe(self) -> str:
        return f"model process on CPUs {_ranges(self.model)}, HTTP processes on {_ranges(self.workers)}"


def plan(requested: int, workers: int, cpus: Sequence[int] | None) -> Split | None:
    """The split for ``--model-cpus requested``, or None for none (0)."""
    if requested == 0:
        return None
    if workers < 2:
        raise ConfigError(
            f"--model-cpus {requested}: with one process (--workers 1) there is nothing to split",
            hint="--workers 2 or more, or leave --model-cpus out",
        )
    if cpus is None:
        raise ConfigError(f"--model-cpus {requested}: this system cannot pin processes to CPUs", hint="--model-cpus 0")
    if requested >= len(cpus):
        raise ConfigError(
            f"--model-cpus {requested}: this process may use {len(cpus)} CPUs ({_ranges(cpus)}), and the HTTP workers"
            " need at least one",
            hint=f"at most {len(cpus) - 1}, or --model-cpus 0 to leave placement to the system",
        )
    return Split(tuple(cpus[:requested]), tuple(cpus[requested:]))


def pin_process(cpus: Sequence[int]) -> None:
    """Every thread of this process on ``cpus``; the threads and processes they start later inherit it."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that has just ended
            os.sched_setaffinity(int(tid), cpus)


def _ranges(cpus: Sequence[int]) -> str:
    """(0, 1, 2, 5, 7, 8) → "0-2,5,7-8", as ``taskset -c`` writes them."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive CPUs
    for c in sorted(cpus):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
