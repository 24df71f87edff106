"""Measure your own function with gpukit: softplus(x) = log(1 + eˣ), element-wise, in float32.

Run it:
    gpukit bench --workload examples/my_workload.py:WORKLOAD
    gpukit bench --workload examples/my_workload.py:WORKLOAD --size 256MiB --device cuda --json

or from Python:
    from gpukit.bench import run
    from my_workload import WORKLOAD
    for row in run(WORKLOAD).results:
        print(row.backend, row.status, row.kernel_median_s, row.gbps)

gpukit gives each implementation fresh random inputs (moved to its device), a poisoned output buffer, checks the
output against ``reference`` before timing anything, and splits compile, transfer and kernel time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from gpukit.bench import Implementation, Size, Workload
from gpukit.bench.workloads.base import relative_error
from gpukit.errors import ConfigError


def parse_size(text: str) -> Size:
    """'64MiB' (bytes of the input) or a bare element count."""
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    for unit, scale in units.items():
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            n = int(text[: -len(unit)]) * scale // 4
            return Size(text, {"n": n})
    if text.isdigit():
        return Size(text, {"n": int(text)})
    raise ConfigError(f"bad size '{text}'", hint="use 64MiB or an element count")


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    # Fresh random values over the interesting range (never zeros): negative, around 0, positive.
    return {"x": rng.uniform(-8.0, 8.0, size["n"]).astype(np.float32)}


def reference(size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    return np.logaddexp(0.0, inputs["x"].astype(np.float64))  # float64, numerically stable


def check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
    err = relative_error(out, ref)
    return err <= 1e-5, err  # float32 exp/log: a few ulp


# One function per way of computing it: (inputs on the backend's device, poisoned output, size) -> None.
def softplus_numpy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    np.logaddexp(np.float32(0.0), inputs["x"], out=out)


def softplus_torch(inputs: Mapping[str, Any], out: Any, size: Size) -> None:  # CPU and CUDA tensors alike
    import torch

    # softplus has no out= argument: write the result into gpukit's (poisoned) output buffer
    out.copy_(torch.nn.functional.softplus(inputs["x"]))


def softplus_cupy(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import cupy

    cupy.logaddexp(np.float32(0.0), inputs["x"], out=out)


WORKLOAD = Workload(
    name="softplus",
    description="log(1 + exp(x)) element-wise, float32",
    unit="gbps",  # memory-bound: report GB/s, compared with the measured copy bandwidth
    sizes=lambda quick: [parse_size("16MiB" if quick else "256MiB")],
    parse_size=parse_size,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    output_spec=lambda size: ((size["n"],), "float32"),
    flops=lambda size: 4.0 * size["n"],  # exp, add, log, compare: a rough count, not used for % of ceiling
    bytes=lambda size: 8.0 * size["n"],  # read x, write out
    amount=lambda size, ref: 8.0 * size["n"],
    implementations={
        "numpy": Implementation("numpy", softplus_numpy),
        "torch-cpu": Implementation("torch-cpu", softplus_torch),
        "torch-cuda": Implementation("torch-cuda", softplus_torch),
        "cupy": Implementation("cupy", softplus_cupy),
    },
)
