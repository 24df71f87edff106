"""Numba CUDA kernels run in numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), in a subprocess."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

import pytest
from kernels_subproc import run_json

pytestmark = pytest.mark.skipif(find_spec("numba_cuda") is None, reason="numba-cuda is not installed")

BODY = """
import json
import numpy as np
from numba import cuda
from gpukit.bench.kernels import cpu, numba_cuda as K
from gpukit.errors import WorkloadError

res = {}
frames = {
    "full": (8, 12, -2.0, 1.0, -1.0, 1.0, 60),
    "valley": (8, 12, -0.80, -0.70, 0.05, 0.15, 200),  # slow escapers: exercises the checked-every-8 path
}
for name, (h, w, x0, x1, y0, y1, it) in frames.items():
    ref32 = cpu.mandelbrot_reference(h, w, x0, x1, y0, y1, it, dtype=np.float32)
    ref64 = cpu.mandelbrot_reference(h, w, x0, x1, y0, y1, it)
    for fn in (K.mandelbrot_naive, K.mandelbrot):
        d = cuda.to_device(np.full((h, w), -1, np.int32))
        fn(d, x0, x1, y0, y1, it)
        got = d.copy_to_host()
        res[name + "/" + fn.__name__] = {
            "vs32": int((got != ref32).sum()), "vs64": int((got != ref64).sum()),
            "unwritten": int((got == -1).sum()), "max": int(got.max()), "distinct": int(np.unique(got).size),
        }

rng = np.random.default_rng(0)
n = 1001  # not a multiple of 4, nor of the 4 x 32 threads the simulator's grid-stride loop uses
a = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype(np.int32)  # full range: sums wrap
b = rng.integers(-2**31, 2**31 - 1, n, dtype=np.int64).astype(np.int32)
out = cuda.to_device(np.full(n, 7, np.int32))
K.vector_add(cuda.to_device(a), cuda.to_device(b), out)
with np.errstate(over="ignore"):
    res["add_i32_exact"] = bool((out.copy_to_host() == a + b).all())
x = rng.standard_normal(n).astype(np.float32)
y = rng.standard_normal(n).astype(np.float32)
out = cuda.to_device(np.full(n, np.nan, np.float32))
K.vector_add(cuda.to_device(x), cuda.to_device(y), out)
res["add_f32_err"] = float(np.abs(out.copy_to_host() - (x.astype(np.float64) + y)).max())
out = cuda.to_device(np.full(n, np.nan, np.float32))
K.saxpy(-1.5, cuda.to_device(x), cuda.to_device(y), out)
res["saxpy_err"] = float(np.abs(out.copy_to_host() - (-1.5 * x.astype(np.float64) + y)).max())

def error_of(call):
    try:
        call()
    except WorkloadError as exc:
        return [type(exc).__name__, bool(exc.hint)]
    return None

dx = cuda.to_device(x)
res["err_host_array"] = error_of(lambda: K.vector_add(x, dx, cuda.to_device(y)))
res["err_dtype_mix"] = error_of(lambda: K.vector_add(cuda.to_device(a), dx, cuda.to_device(y)))
res["err_strided"] = error_of(lambda: K.saxpy(1.0, cuda.to_device(np.zeros(2 * n, np.float32))[::2], dx, dx))
res["err_out_dtype"] = error_of(lambda: K.mandelbrot(cuda.to_device(np.zeros((4, 4), np.float32)), -2, 1, -1, 1, 9))
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def sim() -> dict[str, Any]:
    return run_json(BODY, {"NUMBA_ENABLE_CUDASIM": "1"})


def test_optimised_mandelbrot_matches_exact_float32_emulation(sim: dict[str, Any]) -> None:
    for frame in ("full", "valley"):
        r = sim[f"{frame}/mandelbrot"]
        assert r["unwritten"] == 0
        assert r["vs32"] == 0, r
        assert r["vs64"] <= 2, r
    assert sim["full/mandelbrot"]["max"] == 60
    assert sim["valley/mandelbrot"]["distinct"] >= 10  # a frame with many different counts, not a flat one


def test_naive_mandelbrot_close_to_references(sim: dict[str, Any]) -> None:
    # The simulator rounds 2·zr·zi + y twice where the GPU compiles one fma: allow a boundary pixel or two.
    for frame in ("full", "valley"):
        r = sim[f"{frame}/mandelbrot_naive"]
        assert r["unwritten"] == 0
        assert r["vs32"] <= 2 and r["vs64"] <= 2, r


def test_vector_kernels(sim: dict[str, Any]) -> None:
    assert sim["add_i32_exact"] is True
    assert sim["add_f32_err"] <= 1e-6 * 8
    assert sim["saxpy_err"] <= 1e-6 * 8


@pytest.mark.parametrize("case", ["err_host_array", "err_dtype_mix", "err_strided", "err_out_dtype"])
def test_misuse_raises_workload_error_with_hint(sim: dict[str, Any], case: str) -> None:
    assert sim[case] == ["WorkloadError", True]
