"""On a CUDA GPU: every GPU backend of the bench engine produces verified, event-timed results; ceilings measured.

Run: ``PYTHONPATH=src python -m pytest tests/gpu/test_bench_engine_gpu.py -m gpu -q``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

GPU_ROWS = {
    "vector-add": {"torch-cuda", "cupy", "cupy-cuda-c", "cupy-cuda-c-naive", "triton", "numba-cuda"},
    "saxpy": {"torch-cuda", "cupy", "cupy-cuda-c", "triton", "numba-cuda"},
    "mandelbrot": {"torch-cuda", "cupy-cuda-c", "cupy-cuda-c-naive", "triton", "numba-cuda-naive", "numba-cuda"},
}
SIZES = {"vector-add": ["64MiB", "1MiB:int32", "seed"], "saxpy": ["64MiB"], "mandelbrot": ["seed", "1024x1024x200"]}


@pytest.mark.parametrize("workload", sorted(GPU_ROWS))
def test_gpu_backends_verified(workload: str) -> None:
    from gpukit.bench import run

    bench_run = run(workload, device="cuda", sizes=SIZES[workload], ceilings=False, repeat=5)
    by_backend: dict[str, list] = {}  # type: ignore[type-arg]
    for r in bench_run.results:
        by_backend.setdefault(r.backend, []).append(r)
        if r.status == "skipped":
            continue  # e.g. cupy or numba-cuda not installed on this machine: the reason says so
        assert r.status == "ok", (r.backend, r.size, r.reason)
        assert r.check is True and r.device == "cuda"
        assert 0 < r.kernel_min_s <= r.kernel_median_s <= r.kernel_max_s
        assert r.h2d_s is not None and r.d2h_s is not None and r.compile_s is not None
        assert r.telemetry is None or "before" in r.telemetry
    assert set(by_backend) == GPU_ROWS[workload]
    assert any(r.ok for r in bench_run.results)


def test_ceilings_measured_on_the_gpu() -> None:
    from gpukit.bench.ceilings import measure_ceilings

    c = measure_ceilings(quick=True, cuda=True)
    assert c.d2d_copy_gbps is not None and c.d2d_copy_gbps > 100
    assert c.h2d_pinned_gbps is not None and c.h2d_pinned_gbps > 1
    assert c.gpu_name


def test_tiny_kernels_are_timed_on_the_device_not_at_the_launch_rate() -> None:
    """A 4 KiB add runs in a few µs on the device but takes tens of µs to launch from Python: the pad keeps the
    kernel time to device time, and launch_s reports the host's side (the row is launch-bound)."""
    from gpukit.bench import run

    bench_run = run("vector-add", device="cuda", sizes=["4KiB"], backends=["cupy-cuda-c", "torch-cuda"],
                    ceilings=False, repeat=10)  # fmt: skip
    for r in bench_run.results:
        if r.status == "skipped":
            continue
        assert r.ok, r.reason
        assert r.launch_s is not None and r.launch_s > 0
        assert r.kernel_median_s < 6e-6, (r.backend, r.kernel_median_s, r.launch_s)  # the device's few µs
        assert r.end_to_end_s >= r.launch_s
        if r.backend == "cupy-cuda-c":  # its Python wrapper checks every operand: ~10-20 µs per launch
            assert r.launch_bound, (r.kernel_median_s, r.launch_s)


def _add_inputs(rng):
    import numpy as np

    n = 1 << 26  # 256 MiB per operand: out of L2, so GB/s means HBM
    return {"a": rng.standard_normal(n, dtype=np.float32), "b": rng.standard_normal(n, dtype=np.float32)}


def test_compare_one_call_on_the_gpu() -> None:
    """gpukit.bench.compare: a torch-cuda add is checked, event-timed and faster than NumPy; a first-call-only
    cheat on the GPU is failed (the H200 once printed one ok at 921,250 GB/s)."""
    import numpy as np

    from gpukit.bench import compare

    calls = [0]

    def cheat(a, b, out):
        calls[0] += 1
        if calls[0] == 1:
            torch.add(a, b, out=out)

    rows = compare(
        {"numpy": lambda a, b: a + b, "torch-cuda": lambda a, b, out: torch.add(a, b, out=out),
         "cheat": ("torch-cuda", cheat)},
        inputs=_add_inputs, reference=lambda a, b: a.astype(np.float64) + b, repeat=5,
    )  # fmt: skip
    by = {r.backend: r for r in rows}
    gpu = by["torch-cuda"]
    assert gpu.ok and gpu.device == "cuda" and gpu.check and gpu.speedup and gpu.speedup > 1
    assert gpu.gbps and 100 < gpu.gbps < 20_000  # below any GPU's HBM peak times the margin
    assert by["cheat"].status == "failed" and "right on the first call, wrong after" in (by["cheat"].reason or "")


def test_gpukit_bench_fixture_on_the_gpu(gpukit_bench) -> None:
    """The pytest fixture: a GPU row checked before and after timing, with device-side timing and its spread."""
    row = gpukit_bench(lambda a, b, out: torch.add(a, b, out=out), backend="torch-cuda", inputs=_add_inputs,
                       reference=lambda a, b: a + b, repeat=5)  # fmt: skip
    assert row.ok and row.launch_s is not None and row.kernel_min_s <= row.kernel_median_s <= row.kernel_max_s


def _device_arrays(host):  # type: ignore[no-untyped-def]
    """The same host array on the device as each GPU backend holds it: torch, CuPy, Numba (where installed)."""
    out = {"torch": torch.from_numpy(host).cuda()}
    try:
        import cupy

        out["cupy"] = cupy.asarray(host)
    except Exception:
        pass
    try:
        from numba import cuda

        out["numba"] = cuda.to_device(host)
    except Exception:
        pass
    return out


def test_device_comparisons_agree_with_the_host_ones() -> None:
    """The on-device checks give the host's answers: bytes equal (a NaN payload or a signed zero differs), and the
    float64 relative error to within rounding, for torch, CuPy and Numba arrays alike."""
    import numpy as np

    from gpukit.bench.backends.base import cuda_relative_error, cuda_same_bits
    from gpukit.bench.workloads.base import relative_error, same_bits

    rng = np.random.default_rng(0)
    ref = rng.standard_normal(3_000_001).astype(np.float32)
    ref64 = ref.astype(np.float64) + 1e-7
    variants = {"same": ref.copy(), "signed zero": ref.copy(), "one ulp": ref.copy(), "nan": ref.copy()}
    variants["signed zero"][7] = 0.0
    ref[7] = -0.0
    variants["same"][7] = -0.0
    variants["one ulp"][11] = np.nextafter(ref[11], np.float32(np.inf))
    variants["nan"][13] = np.nan
    uploads: dict[int, object] = {}
    for name, host in variants.items():
        for kind, dev in _device_arrays(host).items():
            assert cuda_same_bits(dev, ref, uploads) is same_bits(host, ref), (name, kind)
            err = cuda_relative_error(dev, ref64, uploads)
            want = relative_error(host, ref64)
            assert err is not None and (err == want or abs(err - want) <= 1e-9 * want), (name, kind, err, want)
    assert cuda_same_bits(torch.zeros(5, device="cuda"), ref, uploads) is None  # another shape: not told here
