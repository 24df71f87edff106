"""On a CUDA GPU: the Triton GEMM against cuBLAS, every gemm dtype and the training steps through the real harness.

Run: ``PYTHONPATH=src python -m pytest tests/gpu/test_gemm_train_gpu.py -m gpu -q``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _events_ms(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()  # sync: read the elapsed time only once the last call has finished
    return start.elapsed_time(end) / reps


@pytest.mark.parametrize("variant", ["auto", "ptr"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_triton_gemm_matches_cublas_on_ragged_shapes(variant, dtype):
    pytest.importorskip("triton")
    from gpukit.bench.kernels.triton_gemm import matmul

    torch.manual_seed(0)
    for m, n, k in ((1000, 1000, 1000), (257, 136, 520)):
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        ref = a.double() @ b.double()
        for bb in (b, b.t().contiguous().t()):
            c = matmul(a, bb, variant=variant)
            assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-2


def test_triton_reaches_80_percent_of_cublas_bf16_at_8192():
    pytest.importorskip("triton")
    from gpukit.bench.kernels.triton_gemm import best_config, matmul

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16).t().contiguous().t()
    t_cublas = _events_ms(lambda: torch.mm(a, b))
    t_triton = _events_ms(lambda: matmul(a, b))
    ratio = t_cublas / t_triton
    print(
        f"cuBLAS {2 * n**3 / t_cublas / 1e9:.0f} TFLOP/s, Triton {2 * n**3 / t_triton / 1e9:.0f} TFLOP/s "
        f"({100 * ratio:.1f}%), config {best_config('tma')}"
    )
    assert ratio >= 0.8


def test_every_gemm_dtype_and_training_step_through_the_harness():
    from gpukit.bench.harness import Settings, prepare, run_one
    from gpukit.bench.workloads import cnn_train, gemm, mlp_train

    settings = Settings(repeats=5, warmup=2, budget_s=10.0)
    rng = np.random.default_rng(0)
    cases = [(gemm.WORKLOAD, impl, f"1024:{dt}") for dt in gemm.DTYPES for impl in ("cublas", "triton", "triton-ptr")]
    cases += [(w.WORKLOAD, "torch-cuda", f"32:{dt}") for w in (cnn_train, mlp_train) for dt in ("fp32", "bf16")]
    major, minor = torch.cuda.get_device_capability()
    for workload, impl, label in cases:
        size = workload.parse_size(label)
        r = run_one(workload, impl, size, prepare(workload, size, rng), settings)
        expect_skip = (impl.startswith("triton") and size["dtype"] not in ("fp16", "bf16")) or (
            size["dtype"] == "fp8" and (major, minor) < (8, 9)
        )
        assert r.status == ("skipped" if expect_skip else "ok"), (workload.name, impl, label, r.reason)
