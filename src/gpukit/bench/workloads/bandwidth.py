"""bandwidth: copies — the memory ceilings as a workload of their own.

Rows: a copy within one memory (CPU RAM with one thread and with all cores; GPU HBM device-to-device), counted as
bytes read plus written (2 × buffer); host→device and device→host over PCIe / NVLink-C2C, pinned and pageable,
counted as bytes moved (1 × buffer). The same rows, at a fixed size, are the ceilings of every run
(``bench/ceilings.py``). Check: the copy must be bit-exact (float32 random data, poisoned destination).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gpukit.bench.workloads import _common as c
from gpukit.bench.workloads.base import Implementation, Size, Workload, same_bits


def sizes(quick: bool) -> list[Size]:
    return [c.vector_size("64MiB" if quick else "1GiB")]


def parse_size(text: str) -> Size:
    return c.vector_size(text, dtypes=("float32",))


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    return {"a": c.random_array(rng, size["n"], "float32")}


def reference(size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(inputs["a"])


def check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
    ok = same_bits(out, ref)  # bit for bit, in chunks (no 1-byte-per-element mask of a 256 MiB ceiling buffer)
    return ok, 0.0 if ok else float("inf")


def _moved(size: Size, ref: np.ndarray) -> float:
    return 4.0 * size["n"]


def _read_write(size: Size, ref: np.ndarray) -> float:
    return 8.0 * size["n"]


# ---- implementations -------------------------------------------------------------------------------------------


def _numpy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    np.copyto(out, inputs["a"])  # one thread


def _numba_cpu(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    from gpukit.bench.workloads._numba_cpu import copy

    copy(inputs["a"], out)  # all cores


def _torch_copy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    out.copy_(inputs["a"], non_blocking=True)  # async for pinned↔device; blocking for pageable (driver-staged)


def _cupy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import cupy

    cupy.copyto(out, inputs["a"])


def _numba_cuda(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    out.copy_to_device(inputs["a"])  # device array → device array: a device-to-device copy


def _pinned_host(inputs: Mapping[str, Any], size: Size) -> dict[str, Any]:
    import torch

    return {"a": torch.from_numpy(inputs["a"]).pin_memory()}


def _pageable_host(inputs: Mapping[str, Any], size: Size) -> dict[str, Any]:
    import torch

    return {"a": torch.from_numpy(np.array(inputs["a"]))}


WORKLOAD = Workload(
    name="bandwidth",
    description="memory copies: CPU RAM, GPU device-to-device, host↔device pinned and pageable",
    unit="gbps",
    sizes=sizes,
    parse_size=parse_size,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    output_spec=lambda size: ((size["n"],), "float32"),
    flops=lambda size: 0.0,
    bytes=lambda size: 8.0 * size["n"],
    amount=_read_write,
    implementations={
        "numpy": Implementation("numpy", _numpy, ceiling="cpu_mem_gbps", note="copy, one thread (read+write)"),
        "numba-cpu": Implementation("numba-cpu", _numba_cpu, ceiling="cpu_mem_gbps", note="copy, all cores"),
        "torch-cpu": Implementation("torch-cpu", _torch_copy, ceiling="cpu_mem_gbps", note="copy (read+write)"),
        "torch-cuda": Implementation("torch-cuda", _torch_copy, ceiling="d2d_copy_gbps", note="device-to-device"),
        "cupy": Implementation("cupy", _cupy, ceiling="d2d_copy_gbps", note="device-to-device"),
        "numba-cuda": Implementation("numba-cuda", _numba_cuda, ceiling="d2d_copy_gbps", note="device-to-device"),
        "torch-cuda-h2d-pinned": Implementation(
            "torch-cuda", _torch_copy, prepare=_pinned_host, amount=_moved, ceiling="h2d_pinned_gbps"
        ),
        "torch-cuda-h2d-pageable": Implementation(
            "torch-cuda", _torch_copy, prepare=_pageable_host, amount=_moved, ceiling="h2d_pageable_gbps"
        ),
        "torch-cuda-d2h-pinned": Implementation(
            "torch-d2h-pinned", _torch_copy, amount=_moved, ceiling="d2h_pinned_gbps"
        ),
        "torch-cuda-d2h-pageable": Implementation(
            "torch-d2h-pageable", _torch_copy, amount=_moved, ceiling="d2h_pageable_gbps"
        ),
    },
)
