"""CPU kernels and references: pure Python, Numba parallel, the float64 truth and the exact float32 emulation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from gpukit.bench.kernels import cpu, frame_f32
from gpukit.errors import WorkloadError

FRAME = (-2.0, 1.0, -1.0, 1.0)


def _hand_count(cr: float, ci: float, max_iter: int) -> int:
    """Complex arithmetic, written independently of the module: first n with |z_n|² > 4."""
    z = 0j
    c = complex(cr, ci)
    for n in range(max_iter):
        if z.real * z.real + z.imag * z.imag > 4.0:
            return n
        z = z * z + c
    return max_iter


def test_reference_matches_hand_counts_at_known_points() -> None:
    ref = cpu.mandelbrot_reference(20, 30, *FRAME, 40)
    assert ref.dtype == np.int32 and ref.shape == (20, 30)
    # Row 10 is the real axis (y = -1 + 10·0.1 = 0); column 20 is x = 0: c = 0 never escapes.
    assert ref[10, 20] == 40
    # c = -2 (column 0 on the real axis) sits on the set's tip: |z|² reaches exactly 4, never more.
    assert ref[10, 0] == 40
    rng = np.random.default_rng(1)
    for r, c in zip(rng.integers(0, 20, 25), rng.integers(0, 30, 25), strict=True):
        assert ref[r, c] == _hand_count(-2.0 + c * 0.1, -1.0 + r * 0.1, 40), (r, c)


def test_reference_counts_escape_steps_exactly() -> None:
    # c = 1: z = 0, 1, 2, 5 → |z_3|² = 25 > 4 first at n = 3 (|z_2|² = 4 is not > 4).
    ref = cpu.mandelbrot_reference(1, 1, 1.0, 2.0, 0.0, 1.0, 10)
    assert ref.tolist() == [[3]]
    # max_iter caps it: with 3 iterations allowed the count is 3 (= max_iter) either way; with 2 it is 2.
    assert cpu.mandelbrot_reference(1, 1, 1.0, 2.0, 0.0, 1.0, 2).tolist() == [[2]]
    assert cpu.mandelbrot_reference(1, 1, 1.0, 2.0, 0.0, 1.0, 0).tolist() == [[0]]


def test_reference_rows_slice_equals_full_frame_rows() -> None:
    full = cpu.mandelbrot_reference(32, 48, *FRAME, 60)
    part = cpu.mandelbrot_reference(32, 48, *FRAME, 60, rows=(10, 17))
    np.testing.assert_array_equal(part, full[10:17])
    with pytest.raises(WorkloadError):
        cpu.mandelbrot_reference(32, 48, *FRAME, 60, rows=(10, 40))


def test_float32_reference_differs_from_float64_only_at_a_few_boundary_pixels() -> None:
    r64 = cpu.mandelbrot_reference(96, 144, *FRAME, 200)
    r32 = cpu.mandelbrot_reference(96, 144, *FRAME, 200, dtype=np.float32)
    differ = r64 != r32
    assert 0 < differ.sum() < 0.01 * differ.size
    # Points that differ are slow escapers (near the boundary), never those that leave within a few steps.
    assert np.minimum(r64, r32)[differ].min() >= 5


def _rounds_correctly(a: np.float32, b: np.float32, c: np.float32, got: np.float32) -> bool:
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    err = abs(Fraction(float(got)) - exact)
    for nb in (np.nextafter(got, np.float32(np.inf)), np.nextafter(got, np.float32(-np.inf))):
        other = abs(Fraction(float(nb)) - exact)
        if other < err:
            return False
        if other == err and int(got.view(np.int32)) & 1:  # a tie must go to the even neighbour
            return False
    return True


def test_fma_f32_is_correctly_rounded_where_double_rounding_is_not() -> None:
    # a·b = 1 + 2^-11 + 2^-24 is exactly halfway between two float32 values; + 2^-60 puts it just above.
    a = b = np.float32(1 + 2**-12)
    c = np.float32(2**-60)
    got = cpu.fma_f32(a, b, c)
    assert got == np.float32(1 + 2**-11 + 2**-23)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))  # rounds twice, lands on the tie: wrong
    assert naive != got
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((3, 300)).astype(np.float32)
    out = cpu.fma_f32(*xs)
    assert all(_rounds_correctly(x, y, z, g) for x, y, z, g in zip(*xs, out, strict=True))


def test_mandelbrot_python_fills_numpy_and_lists_like_the_reference() -> None:
    ref = cpu.mandelbrot_reference(12, 18, *FRAME, 30)
    arr = np.full((12, 18), -1, dtype=np.int32)
    cpu.mandelbrot_python(arr, *FRAME, 30)
    np.testing.assert_array_equal(arr, ref)
    rows = [[-1] * 18 for _ in range(12)]
    cpu.mandelbrot_python(rows, *FRAME, 30)
    assert rows == ref.tolist()


def test_mandelbrot_numba_parallel_float64_is_exact_and_float32_close() -> None:
    ref64 = cpu.mandelbrot_reference(40, 60, *FRAME, 100)
    out = np.full((40, 60), -1, dtype=np.int32)
    cpu.mandelbrot_numba_parallel(out, *FRAME, 100)
    np.testing.assert_array_equal(out, ref64)
    ref32 = cpu.mandelbrot_reference(40, 60, *FRAME, 100, dtype=np.float32)
    out32 = np.full((40, 60), -1, dtype=np.int32)
    cpu.mandelbrot_numba_parallel(out32, *(np.float32(v) for v in FRAME), 100)  # float32 bounds → float32 path
    assert (out32 != ref32).sum() <= 3  # it rounds 2·zr·zi + y twice where the GPU kernels fuse it
    assert (out32 == -1).sum() == 0


def test_mandelbrot_numba_parallel_rejects_bad_output() -> None:
    with pytest.raises(WorkloadError, match="C-contiguous 2-D numpy int32"):
        cpu.mandelbrot_numba_parallel(np.zeros((4, 4), dtype=np.int64), *FRAME, 10)
    with pytest.raises(WorkloadError, match="C-contiguous"):
        cpu.mandelbrot_numba_parallel(np.zeros((4, 8), dtype=np.int32)[:, ::2], *FRAME, 10)


@pytest.mark.parametrize(
    ("shape", "bounds", "max_iter", "match"),
    [
        ((0, 5), FRAME, 10, "empty"),
        ((4, 4), (-2.0, float("nan"), -1.0, 1.0), 10, "finite"),
        ((4, 4), FRAME, -1, "max_iter"),
        ((4, 4), FRAME, 2.5, "max_iter"),
        ((600_000, 4), FRAME, 10, "too large"),
    ],
)
def test_reference_rejects_bad_frames(shape: tuple[int, int], bounds: tuple, max_iter: object, match: str) -> None:
    with pytest.raises(WorkloadError, match=match) as info:
        cpu.mandelbrot_reference(*shape, *bounds, max_iter)  # type: ignore[arg-type]
    assert info.value.hint


def test_frame_f32_rounds_once_on_the_host() -> None:
    f = frame_f32(1024, 1536, -2.0, 1.0, -1.0, 1.0)
    assert (f.x0, f.y0) == (-2.0, -1.0)
    assert f.dx == float(np.float32(3.0 / 1536)) and f.dy == float(np.float32(2.0 / 1024))


def test_vector_add_and_saxpy_python_on_arrays_and_lists() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-1000, 1000, 101).astype(np.int32)
    b = rng.integers(-1000, 1000, 101).astype(np.int32)
    out = np.zeros(101, dtype=np.int32)
    cpu.vector_add_python(a, b, out)
    np.testing.assert_array_equal(out, a + b)
    lst: list[int] = [0] * 3
    cpu.vector_add_python([1, 2, 3], [10, 20, 30], lst)
    assert lst == [11, 22, 33]
    x = rng.standard_normal(101).astype(np.float32)
    y = rng.standard_normal(101).astype(np.float32)
    res = np.zeros(101, dtype=np.float32)
    cpu.saxpy_python(2.5, x, y, res)
    np.testing.assert_allclose(res, 2.5 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-6)
    with pytest.raises(WorkloadError, match="lengths differ"):
        cpu.saxpy_python(1.0, x, y[:-1], res)
