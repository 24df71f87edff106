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
same first CPUs of its GPU's NUMA node.

The N CPUs are N of those this process may use (``gpukit.hardware.cpu.usable_cpus``, its affinity: start it under
``taskset`` or in a cpuset to choose which), the first of those of the GPU's NUMA node where the system says which
(``gpu_cpus``), then the first others: on a host of two sockets, the model process of a server on a GPU of the second
socket runs on that socket, next to its GPU, rather than on CPUs 0 to N-1. The HTTP workers share the rest, on either
socket.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpukit.errors import ConfigError
from gpukit.hardware.cpu import pci_local_cpus

__all__ = ["Split", "gpu_cpus", "pci_address", "pin_process", "plan"]


@dataclass(frozen=True)
class Split:
    model: tuple[int, ...]  # the model process's CPUs
    workers: tuple[int, ...]  # every HTTP worker's
    near_gpu: bool = False  # the model's CPUs are the GPU's NUMA node's, and the others are not all of it

    def describe(self) -> str:
        where = " (the GPU's NUMA node)" if self.near_gpu else ""
        return f"model process on CPUs {_ranges(self.model)}{where}, HTTP processes on {_ranges(self.workers)}"


def gpu_cpus(device: str) -> tuple[int, ...] | None:
    """The CPUs of the NUMA node that CUDA device ``device`` ("cuda", "cuda:1") hangs off, or None where that is not
    known (a CPU device, no CUDA, no sysfs)."""
    address = pci_address(device)
    return pci_local_cpus(address) if address else None


def pci_address(device: str) -> str | None:
    """CUDA device ``device``'s PCI address as sysfs names it ("0000:9a:00.0"), or None (a CPU device, no CUDA, an
    older torch). Starts CUDA in this process: torch reads it from the device's properties."""
    if not device.startswith("cuda"):
        return None
    try:
        import torch

        props: Any = torch.cuda.get_device_properties(torch.device(device).index or 0)  # pci_* are not in its stub
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except (ImportError, RuntimeError, AssertionError, AttributeError):  # no torch, no CUDA, an older torch
        return None


def plan(requested: int, workers: int, cpus: Sequence[int] | None, near: Sequence[int] | None = None) -> Split | None:
    """The split for ``--model-cpus requested``, or None for none (0). ``near``: the GPU's NUMA node's CPUs
    (``gpu_cpus``), from which the model's are taken first."""
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
    nearby = set(near or ())
    local = [c for c in cpus if c in nearby]
    ordered = local + [c for c in cpus if c not in nearby]
    near_gpu = len(local) >= requested and len(local) < len(cpus)
    return Split(tuple(ordered[:requested]), tuple(sorted(ordered[requested:])), near_gpu)


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
