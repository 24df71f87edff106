"""A synthetic run with every kind of row the report shows (shared by the report tests; not a test module)."""

from __future__ import annotations

from gpukit.bench.results import Ceilings, Result, Run, legacy_size


def _row(workload, backend, device, size, t, unit, amount, *, flops=None, nbytes=None, h2d=0.0, d2h=0.0, **kw):
    r = Result(
        workload=workload,
        backend=backend,
        device=device,
        size=size,
        throughput_unit=unit,
        kernel_median_s=t,
        kernel_min_s=t * 0.98,
        kernel_max_s=t * 1.02,
        h2d_s=h2d,
        d2h_s=d2h,
        end_to_end_s=t + h2d + d2h,
        flops=flops,
        bytes=nbytes,
        check=True,
        error=1e-7,
        compile_s=0.01,
        **kw,
    )
    r.size_x, r.size_group = legacy_size(size)  # what the engine's Size carries on a measured row
    setattr(r, unit, amount / t / {"gbps": 1e9, "tflops": 1e12, "giter_per_s": 1e9, "samples_per_s": 1.0}[unit])
    return r


def synthetic_run(*, with_training: bool = True) -> Run:
    rows: list[Result] = []
    for n in (256, 1024, 4096):
        fl = 2.0 * n**3
        for dt, cpu_rate, gpu_rate in (("fp32", 1e12, 50e12), ("bf16", 2e12, 700e12)):
            by = 3 * n * n * (4 if dt == "fp32" else 2)
            rows.append(_row("gemm", "torch-cpu", "cpu", f"{n}:{dt}", fl / cpu_rate, "tflops", fl, flops=fl, nbytes=by))
            rows.append(
                _row(
                    "gemm",
                    "cublas",
                    "cuda",
                    f"{n}:{dt}",
                    2e-5 + fl / gpu_rate,
                    "tflops",
                    fl,
                    flops=fl,
                    nbytes=by,
                    h2d=by / 25e9,
                    d2h=n * n * 4 / 25e9,
                )
            )
        rows.append(
            _row(
                "gemm",
                "triton",
                "cuda",
                f"{n}:bf16",
                2.2e-5 + fl / 600e12,
                "tflops",
                fl,
                flops=fl,
                nbytes=3 * n * n * 2,
            )
        )
    rows.append(
        Result(
            workload="gemm",
            backend="torch-cpu",
            device="cpu",
            size="4096:int8",
            status="skipped",
            reason="no AVX-VNNI/AMX on this CPU",
        )
    )
    rows.append(
        Result(
            workload="gemm",
            backend="cublas",
            device="cuda",
            size="256:fp8",
            status="failed",
            reason="check failed: relative error 0.5 (tolerance 0.05)",
        )
    )
    for n in (2**16, 2**20, 2**24):
        rows.append(
            _row("vector-add", "numpy", "cpu", f"{n * 12}B", n * 12 / 8e9, "gbps", n * 12, flops=n, nbytes=n * 12)
        )
        rows.append(
            _row(
                "vector-add",
                "torch-cuda",
                "cuda",
                f"{n * 12}B",
                5e-6 + n * 12 / 4e12,
                "gbps",
                n * 12,
                flops=n,
                nbytes=n * 12,
                h2d=n * 8 / 25e9,
                d2h=n * 4 / 25e9,
            )
        )
    rows.append(_row("mandelbrot", "python", "cpu", "1536x1024x20", 5.17, "giter_per_s", 1536 * 1024 * 20))
    rows.append(_row("mandelbrot", "numba-cpu", "cpu", "1536x1024x20", 4.7e-3, "giter_per_s", 1536 * 1024 * 20))
    rows.append(_row("mandelbrot", "numba-cuda", "cuda", "1536x1024x20", 1.0e-4, "giter_per_s", 1536 * 1024 * 20))
    if with_training:
        for b in (1, 8, 32, 128):
            for w, cpu_step, gpu_step in (("cnn-train", 2e-3 * b, 1e-3 + 1e-5 * b), ("mlp-train", 5e-5 * b, 3e-4)):
                rows.append(_row(w, "torch-cpu", "cpu", f"{b}:fp32", cpu_step, "samples_per_s", b))
                rows.append(_row(w, "torch-cuda", "cuda", f"{b}:fp32", gpu_step, "samples_per_s", b))
    ceilings = Ceilings(
        d2d_copy_gbps=4175.0,
        h2d_pinned_gbps=55.0,
        d2h_pinned_gbps=55.0,
        cpu_mem_gbps=80.0,
        cpu_threads=16,
        gpu_name="NVIDIA H200",
        spec_name="NVIDIA H200 SXM",
        spec_bandwidth_gbps=4800.0,
        spec_fp32_tflops=67.0,
        notes=["synthetic"],
    )
    from gpukit.bench.workloads.gemm import annotate

    annotate(rows)  # what analyse stored on a measured run's gemm rows: % of the run's cuBLAS rate
    return Run(
        started_at="2026-11-30T05:00:00Z",
        machine={"cpu": {"model": "Test CPU", "cores": 16}, "gpus": [{"name": "NVIDIA H200", "memory_gib": 139.8}]},
        versions={"torch": "2.14.1"},
        settings={"sweep": True},
        ceilings=ceilings,
        results=rows,
        duration_s=12.0,
    )
