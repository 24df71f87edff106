"""Which CPUs the processes of a several-process server run on (``--model-cpus``): the model process keeps a few
to itself, the HTTP workers share the others.

A ResNet-50 server on CUDA is paced by two threads of the model process: the one preparing batches (nvJPEG's host
work for each batch) and the one running them, which spins while it waits for the GPU. Left to the kernel on a busy
host they shared CPUs with each other, with the HTTP workers and with a load generator: on one H100 host with 16
CPUs and the load generator beside the server, a batch of about 70 images took 7.0-9.0 ms to prepare and the server
answered 9,106-10,034 req/s; with the model process's threads on 4 CPUs of their own, 5.4-5.6 ms and 11,013-11,312
(benchmarks/serve-placement_h100_2026-12-06.md). Nicing the workers instead did nothing (9,947).

``auto`` splits on CUDA with at least 2 HTTP workers when the CPUs this process may use (its affinity: a cpuset,
``taskset``) number at least the workers plus ``MODEL_CPUS``: the first ``MODEL_CPUS`` of them for the model
process, the rest for the workers. Otherwise it does not split: one process serving; a CPU device (its forward pass
wants every core); too few CPUs to leave each worker one. ``--model-cpus N`` splits with N, ``0`` never.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from gpukit.errors import ConfigError

__all__ = ["MODEL_CPUS", "Split", "pin_process", "plan", "usable_cpus"]

MODEL_CPUS = 4  # the preparing and executing threads, the pipes' reader, the replies' writer


@dataclass(frozen=True)
class Split:
    model: tuple[int, ...]  # the model process's CPUs
    workers: tuple[int, ...]  # every HTTP worker's

    def describe(self) -> str:
        return f"model process on CPUs {_ranges(self.model)}, HTTP processes on {_ranges(self.workers)}"


def usable_cpus() -> tuple[int, ...] | None:
    """The CPUs this process may run on, or None where the system cannot say (not Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return tuple(sorted(os.sched_getaffinity(0)))


def plan(requested: int | None, workers: int, cuda: bool, cpus: Sequence[int] | None) -> Split | None:
    """The split for ``--model-cpus`` (None: auto, see the module's doc), or None for none."""
    if requested is None:  # auto
        if workers < 2 or not cuda or cpus is None or len(cpus) < workers + MODEL_CPUS:
            return None
        requested = MODEL_CPUS
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
    out: list[str] = []
    for c in sorted(cpus):
        if out and c == int(out[-1].rpartition("-")[2]) + 1:
            out[-1] = f"{out[-1].partition('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)
