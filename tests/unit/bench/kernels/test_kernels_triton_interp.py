"""Triton kernels run by Triton's interpreter (TRITON_INTERPRET=1) on CPU tensors, in a subprocess."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

import pytest
from kernels_subproc import run_json

pytestmark = pytest.mark.skipif(find_spec("triton") is None, reason="triton is not installed")

BODY = """
import json
import numpy as np
import torch
from gpukit.bench.kernels import cpu, triton_kernels as K
from gpukit.errors import WorkloadError

res = {}
frames = {
    "full": (8, 12, -2.0, 1.0, -1.0, 1.0, 60),  # 8 x 12: a second, ragged program column (8 x 8 tiles)
    "valley": (11, 9, -0.80, -0.70, 0.05, 0.15, 203),  # ragged both ways; max_iter not a multiple of UNROLL
}
for name, (h, w, x0, x1, y0, y1, it) in frames.items():
    out = torch.full((h, w), -1, dtype=torch.int32)
    K.mandelbrot(out, x0, x1, y0, y1, it)
    got = out.numpy()
    ref32 = cpu.mandelbrot_reference(h, w, x0, x1, y0, y1, it, dtype=np.float32)
    ref64 = cpu.mandelbrot_reference(h, w, x0, x1, y0, y1, it)
    res[name] = {"vs32": int((got != ref32).sum()), "vs64": int((got != ref64).sum()),
                 "unwritten": int((got == -1).sum()), "max": int(got.max()), "distinct": int(np.unique(got).size)}

g = torch.Generator().manual_seed(0)
n = 3001  # not a multiple of 4 nor of BLOCK (2048): two programs, the second ragged
a = torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, generator=g)
b = torch.randint(-2**31, 2**31 - 1, (n,), dtype=torch.int32, generator=g)
out = torch.full((n,), 7, dtype=torch.int32)
K.vector_add(a, b, out)
res["add_i32_exact"] = bool(torch.equal(out, a + b))  # torch int32 addition wraps, like the kernel
x = torch.randn(n, generator=g)
y = torch.randn(n, generator=g)
out = torch.full((n,), float("nan"))
K.vector_add(x, y, out)
res["add_f32_err"] = float((out.double() - (x.double() + y.double())).abs().max())
out = torch.full((n,), float("nan"))
K.saxpy(-1.5, x, y, out)
res["saxpy_err"] = float((out.double() - (-1.5 * x.double() + y.double())).abs().max())

def error_of(call):
    try:
        call()
    except WorkloadError as exc:
        return [type(exc).__name__, bool(exc.hint)]
    return None

res["err_float64"] = error_of(lambda: K.vector_add(x.double(), y.double(), out.double()))
res["err_strided"] = error_of(lambda: K.saxpy(1.0, torch.zeros(2 * n)[::2], y, out))
res["err_shape"] = error_of(lambda: K.vector_add(x[:-1], y[:-1], out))
res["err_numpy"] = error_of(lambda: K.vector_add(x.numpy(), y, out))
res["err_mandel_1d"] = error_of(lambda: K.mandelbrot(torch.zeros(16, dtype=torch.int32), -2, 1, -1, 1, 9))
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def interp() -> dict[str, Any]:
    return run_json(BODY, {"TRITON_INTERPRET": "1"})


def test_mandelbrot_matches_float32_emulation(interp: dict[str, Any]) -> None:
    for frame in ("full", "valley"):
        r = interp[frame]
        assert r["unwritten"] == 0
        # The interpreter evaluates tl.fma as a·b + c with two roundings: allow a boundary pixel.
        assert r["vs32"] <= 1 and r["vs64"] <= 2, r
    assert interp["full"]["max"] == 60
    assert interp["valley"]["max"] == 203 and interp["valley"]["distinct"] >= 10


def test_vector_kernels(interp: dict[str, Any]) -> None:
    assert interp["add_i32_exact"] is True
    assert interp["add_f32_err"] <= 1e-6 * 8
    assert interp["saxpy_err"] <= 1e-6 * 8


@pytest.mark.parametrize("case", ["err_float64", "err_strided", "err_shape", "err_numpy", "err_mandel_1d"])
def test_misuse_raises_workload_error_with_hint(interp: dict[str, Any], case: str) -> None:
    assert interp[case] == ["WorkloadError", True]
