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
    """The better of the two variants reaches 80 % of cuBLAS.

    Measured: on H200s pointer loads 96–98.5 %, TMA 79–90 %; on an H100 TMA 75–93 % and pointers 73–79 %, the TMA
    figure set by the tile the autotuner picked in that process (128×128 for the high ones, 128×256 for 75 %). cuBLAS
    and the variants take turns for five rounds and each one's median is compared."""
    pytest.importorskip("triton")
    from gpukit.bench.kernels.triton_gemm import best_config, matmul

    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16).t().contiguous().t()
    runs = {
        "cublas": lambda: torch.mm(a, b),
        "tma": lambda: matmul(a, b, variant="tma"),
        "ptr": lambda: matmul(a, b, variant="ptr"),
    }
    rounds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(5):
        for name, fn in runs.items():
            rounds[name].append(_events_ms(fn))
    ms = {name: float(np.median(times)) for name, times in rounds.items()}
    ratios = {v: ms["cublas"] / ms[v] for v in ("tma", "ptr")}
    tflops = {name: 2 * n**3 / t / 1e9 for name, t in ms.items()}
    print(
        f"cuBLAS {tflops['cublas']:.0f} TFLOP/s; Triton TMA {tflops['tma']:.0f} ({100 * ratios['tma']:.1f}%), "
        f"pointers {tflops['ptr']:.0f} ({100 * ratios['ptr']:.1f}%); configs {best_config('tma')}, {best_config('ptr')}"
    )
    assert max(ratios.values()) >= 0.8, ratios


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
