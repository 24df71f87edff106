"""Every hand-written GPU kernel on real sizes against its reference (skipped without a CUDA GPU).

Mandelbrot kernels must match ``mandelbrot_reference(dtype=np.float32)`` — the exact float32 arithmetic they all
share — pixel for pixel; vector kernels must match numpy exactly (int32) or to float32 rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from gpukit.bench.kernels import cpu
from gpukit.errors import BackendUnavailable

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)

FRAMES = {
    "article": (384, 512, -2.0, 1.0, -1.0, 1.0, 256),
    "seed": (1024, 1536, -2.0, 1.0, -1.0, 1.0, 20),
    "valley": (256, 256, -0.80, -0.70, 0.05, 0.15, 1000),  # slow escapers near the boundary
}
SIZES = [1, 3, 4, 5, 1000, 2**20 + 3]


@cache
def _ref32(frame: str) -> np.ndarray:
    h, w, *bounds, it = FRAMES[frame]
    return cpu.mandelbrot_reference(h, w, *bounds, it, dtype=np.float32)


def _backend(name: str) -> ModuleType:
    try:
        if name == "cuda_c":
            from gpukit.bench.kernels import cuda_c

            cuda_c.compile_module()
            return cuda_c
        if name == "numba":
            from gpukit.bench.kernels import numba_cuda

            numba_cuda._cuda()
            return numba_cuda
        from gpukit.bench.kernels import triton_kernels

        triton_kernels._jit()
        return triton_kernels
    except BackendUnavailable as exc:
        pytest.skip(f"{name} unavailable: {exc} ({exc.hint})")


def _to_dev(backend: str, host: np.ndarray) -> Any:
    if backend == "cuda_c":
        import cupy

        return cupy.asarray(host)
    if backend == "numba":
        from numba import cuda

        return cuda.to_device(host)
    return torch.from_numpy(host).cuda()


def _to_host(backend: str, dev: Any) -> np.ndarray:
    if backend == "cuda_c":
        return dev.get()  # type: ignore[no-any-return]
    if backend == "numba":
        return dev.copy_to_host()  # type: ignore[no-any-return]
    return dev.cpu().numpy()  # type: ignore[no-any-return]


def _run_vector(backend: str, fn: Callable[..., None], host_in: list[np.ndarray], fill: Any, *scalars: float) -> Any:
    ins = [_to_dev(backend, x) for x in host_in]
    out = _to_dev(backend, np.full(host_in[0].shape, fill, dtype=host_in[0].dtype))
    fn(*scalars, *ins, out)
    return _to_host(backend, out)


@pytest.mark.parametrize("backend", ["cuda_c", "numba", "triton"])
@pytest.mark.parametrize("n", SIZES)
def test_vector_add_and_saxpy(backend: str, n: int) -> None:
    mod = _backend(backend)
    rng = np.random.default_rng(n)
    a = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(_run_vector(backend, mod.vector_add, [a, b], 7), a + b)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(_run_vector(backend, mod.vector_add, [x, y], np.nan), x + y)  # one rounding
    got = _run_vector(backend, mod.saxpy, [x, y], np.nan, 1.75)
    np.testing.assert_allclose(got, 1.75 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)
    if backend == "cuda_c":
        np.testing.assert_array_equal(_run_vector(backend, mod.vector_add_naive, [x, y], np.nan), x + y)


@pytest.mark.parametrize(("offsets"), [(1, 1, 1), (1, 2, 3), (0, 0, 2)])
def test_cuda_c_vector_add_misaligned_views(offsets: tuple[int, int, int]) -> None:
    """Co-misaligned pointers take a scalar head then 16-byte vectors; differently misaligned ones stay scalar."""
    mod = _backend("cuda_c")
    import cupy

    n = 2**20 + 5
    rng = np.random.default_rng(5)
    bufs = [cupy.asarray(rng.standard_normal(n + 4).astype(np.float32)) for _ in range(3)]
    oa, ob, oo = offsets
    a, b, out = bufs[0][oa : oa + n], bufs[1][ob : ob + n], bufs[2][oo : oo + n]
    out.fill(np.nan)
    mod.vector_add(a, b, out)
    np.testing.assert_array_equal(out.get(), a.get() + b.get())
    assert bool(cupy.isnan(bufs[2][:oo]).sum() == 0)  # nothing written before the view


MANDELS = [
    ("cuda_c", "mandelbrot"),
    ("cuda_c", "mandelbrot_naive"),
    ("numba", "mandelbrot"),
    ("numba", "mandelbrot_naive"),
    ("triton", "mandelbrot"),
]


@pytest.mark.parametrize(("backend", "fn_name"), MANDELS)
@pytest.mark.parametrize("frame", list(FRAMES))
def test_mandelbrot_matches_float32_reference_exactly(backend: str, fn_name: str, frame: str) -> None:
    mod = _backend(backend)
    h, w, *bounds, it = FRAMES[frame]
    out = _to_dev(backend, np.full((h, w), -1, dtype=np.int32))
    getattr(mod, fn_name)(out, *bounds, it)
    got = _to_host(backend, out)
    ref = _ref32(frame)
    assert (got == -1).sum() == 0
    mismatched = np.argwhere(got != ref)
    assert mismatched.size == 0, f"{mismatched.shape[0]} pixels differ, first {mismatched[:5].tolist()}"


def test_gpu_float32_counts_stay_close_to_float64_truth() -> None:
    mod = _backend("cuda_c")
    h, w, *bounds, it = FRAMES["article"]
    out = _to_dev("cuda_c", np.full((h, w), -1, dtype=np.int32))
    mod.mandelbrot(out, *bounds, it)
    ref64 = cpu.mandelbrot_reference(h, w, *bounds, it)
    assert (_to_host("cuda_c", out) != ref64).mean() < 0.005
