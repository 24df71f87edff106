"""`bench --quick` under its budget without a weaker check (issue 24): chunked checks give the whole-array figures,
the timed calls get the first call's buffer poisoned again, and a machine without a CUDA driver learns it without
importing numba.cuda."""

from __future__ import annotations

import numpy as np
import pytest

from gpukit.bench.backends import base as backends_base
from gpukit.bench.workloads import base


def _whole(out: np.ndarray, ref: np.ndarray) -> float:
    o, r = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(o - r) / np.linalg.norm(r))


@pytest.mark.parametrize("n", [1, 5, base.CHECK_CHUNK - 1, base.CHECK_CHUNK + 3, 3 * base.CHECK_CHUNK])
def test_chunked_relative_error_is_the_whole_array_one(n: int) -> None:
    rng = np.random.default_rng(n)
    ref = rng.random(n) + 0.5
    out = (ref * (1 + 1e-7 * rng.standard_normal(n))).astype(np.float32)
    assert base.relative_error(out, ref) == pytest.approx(_whole(out, ref), rel=1e-9)
    assert base.relative_error(ref, ref) == 0.0


def test_chunked_relative_error_never_passes_nan_inf_or_a_wrong_shape() -> None:
    ref = np.ones(3 * base.CHECK_CHUNK + 7)
    for bad in (np.nan, np.inf, -np.inf):
        out = ref.copy()
        out[-1] = bad  # in the last, partial chunk
        assert base.relative_error(out, ref) == float("inf")
    assert base.relative_error(ref[:-1], ref) == float("inf")
    assert base.relative_error(np.zeros(4), np.zeros(4)) == 0.0 and base.relative_error(
        np.ones(4), np.zeros(4)
    ) == float("inf")
    ints = np.arange(10, dtype=np.int32)
    assert base.relative_error(ints + 1, ints.astype(np.int64)) == pytest.approx(_whole(ints + 1, ints))


def test_bandwidth_check_is_bit_exact() -> None:
    from gpukit.bench.workloads.bandwidth import check

    ref = np.random.default_rng(0).random(1000, dtype=np.float32)
    assert check(ref.copy(), ref, None)[0]  # type: ignore[arg-type]
    flipped = ref.copy()
    flipped.view(np.uint32)[500] ^= 1  # one bit of one element
    assert not check(flipped, ref, None)[0]  # type: ignore[arg-type]


def test_the_timed_calls_get_the_first_buffer_poisoned_again() -> None:
    from gpukit.bench.backends import get_backend

    for name in ("numpy", "torch-cpu"):
        b = get_backend(name)
        out = b.poisoned((4,), "float32")
        b.fill(out, 1.0)
        again = b.repoison(out, "float32")
        assert again is out and np.isnan(b.to_host(again)).all()
    ints = get_backend("numpy").repoison(np.zeros(3, dtype=np.int32), "int32")
    assert (ints == backends_base.POISON_INT).all()


def test_no_cuda_driver_is_found_without_importing_numba_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins
    import ctypes

    from gpukit.bench.backends import numba_cuda

    def no_lib(name: str, *a: object, **k: object) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    real_import = builtins.__import__

    def guarded(name: str, *args: object, **kw: object) -> object:
        if name == "numba" and args and "cuda" in (args[2] or ()):  # type: ignore[operator]
            raise AssertionError("numba.cuda imported")
        return real_import(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(numba_cuda.sys, "platform", "linux")
    monkeypatch.delenv("NUMBA_CUDA_DRIVER", raising=False)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    numba_cuda._no_driver.cache_clear()
    monkeypatch.setattr(builtins, "__import__", guarded)
    try:
        avail = numba_cuda.NumbaCudaBackend().availability()
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
        numba_cuda._no_driver.cache_clear()
    assert not avail.ok and avail.reason and avail.reason.startswith("no CUDA device visible to numba")
    assert "libcuda.so.1 does not load" in avail.reason and avail.hint and "gpukit doctor" in avail.hint


def test_bench_ends_its_process_without_finalizing_torch(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import gpukit.cli as cli

    monkeypatch.setattr(cli, "_skip_teardown", False)
    args = ["bench", "vector-add", "-b", "numpy", "--size", "4KiB", "--no-ceilings", "--db", str(tmp_path / "h.db")]
    assert cli.main(args) == 0
    assert cli._skip_teardown  # main(None), the process's entry point, then ends it with os._exit after flushing
