"""gemm: C = A @ B for square n×n matrices, per dtype — the tensor-core workload.

Sizes are ``<n>:<dtype>`` (``4096:bf16``). On the GPU through torch/cuBLAS: fp32 (IEEE, CUDA cores), tf32, fp16,
bf16 (tensor cores), fp8 e4m3 (``torch._scaled_mm``, sm_89+) and int8 (``torch._int_mm``); the Triton teaching
kernel (``kernels/triton_gemm.py``) for fp16/bf16, TMA variant on Hopper ("triton") and the pointer variant
("triton-ptr"). On the CPU through torch: fp32, bf16 where the CPU has bf16 matrix instructions (AVX512-BF16 or
AMX-BF16), int8 where it has VNNI or AMX-INT8; other dtypes are skipped with the reason.

Counted per call: 2·n³ FLOP (int8: integer operations); bytes = A and B read once, C written once. Inputs are fresh
random values already *representable in the dtype* (rounded once on the host), so the float64 reference of the same
values isolates the GEMM's own arithmetic: relative L2 error under TOLERANCE[dtype] (fp32 2e-5 — summation order
over K = 8192 terms; tf32 2e-3, 10-bit mantissa inputs; fp16 5e-3 and bf16 1e-2, one output rounding; fp8 1e-2, bf16
output; int8 exact).

Low-precision outputs (fp16/bf16) have no NumPy dtype for the harness's output buffer: the first call publishes its
result there (cast to float32, for the check); every later, timed call runs the GEMM alone into a buffer of its own
dtype, so the cast is never timed. After the timed calls the harness asks for one more published call (``republish``)
and checks it, so a GEMM that is right only on its first call fails.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np

from gpukit.bench.results import Result
from gpukit.bench.workloads.base import Implementation, Size, Workload, relative_error
from gpukit.errors import ConfigError

__all__ = [
    "CPU_DTYPES",
    "DTYPES",
    "TOLERANCE",
    "WORKLOAD",
    "annotate",
    "check_description",
    "check_rows",
    "cpu_matrix_features",
    "measured_rates",
]

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
CPU_DTYPES = ("fp32", "bf16", "int8")
TOLERANCE = {"fp32": 2e-5, "tf32": 2e-3, "fp16": 5e-3, "bf16": 1e-2, "fp8": 1e-2, "int8": 0.0}
_ITEMSIZE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
_OUT_ITEMSIZE = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 2, "int8": 4}  # fp8 → bf16 out, int8 → int32
LADDER = (256, 512, 1024, 2048, 4096, 8192)


def size_of(n: int, dtype: str) -> Size:
    return Size(f"{n}:{dtype}", {"n": n, "dtype": dtype}, magnitude=float(n), group=dtype)


def sizes(quick: bool) -> list[Size]:
    if quick:
        return [size_of(n, dt) for dt in ("fp32", "bf16") for n in (256, 1024, 4096)]
    return [size_of(n, dt) for dt in DTYPES for n in LADDER]


def parse_size(text: str) -> Size:
    m = re.fullmatch(r"\s*(\d+)\s*(?:[:-]\s*(\w+))?\s*", text)
    if not m:
        raise ConfigError(f"bad gemm size '{text}'", hint="use <n>:<dtype>, e.g. 4096:bf16 (M = N = K = n)")
    n, dtype = int(m.group(1)), (m.group(2) or "fp32").lower()
    if dtype not in DTYPES:
        raise ConfigError(f"unknown gemm dtype '{dtype}'", hint=f"use one of {', '.join(DTYPES)}")
    if not 16 <= n <= 65536:
        raise ConfigError(f"gemm n={n} is out of range", hint="use 16 ≤ n ≤ 65536")
    return size_of(n, dtype)


@cache
def cpu_matrix_features() -> frozenset[str]:
    """The CPU's matrix-math flags from /proc/cpuinfo (empty where it cannot be read, e.g. not Linux)."""
    wanted = {"avx512_bf16", "amx_bf16", "amx_int8", "avx512_vnni", "avx_vnni", "amx_tile"}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(wanted & set(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return frozenset()


# ---- inputs and reference ---------------------------------------------------------------------------------------


def _round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to ``dtype`` and back: the exact values the GEMM will see."""
    if dtype in ("fp32", "tf32"):
        return x
    import torch

    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]
    return torch.from_numpy(x).to(tdt).to(torch.float32).numpy()


def make_inputs(size: Size, rng: np.random.Generator) -> dict[str, Any]:
    n, dtype = size["n"], size["dtype"]
    if dtype == "int8":  # |sum| ≤ n·64·64 < 2^31 for n ≤ 65536... and far below int32 for the ladder
        return {k: rng.integers(-64, 64, size=(n, n), dtype=np.int8) for k in ("a", "b")}
    # Zero-mean normal values: a GEMM output of order sqrt(n), never zero; fp8 e4m3 represents ±448.
    return {k: _round_to(rng.standard_normal((n, n), dtype=np.float32), dtype) for k in ("a", "b")}


# From this n on, the float64 reference is computed for CHECK_ROWS evenly spaced rows of C only (first and last
# among them) and the check compares those rows: a full float64 GEMM at n = 8192 costs 1.1 TFLOP on the host —
# seconds to minutes — per dtype, more than the measurement itself. Every output row depends on all of B, so a
# wrong tile, layout or reduction still shows in the sampled rows.
SUBSET_FROM_N = 2048
CHECK_ROWS = 256


def check_rows(n: int) -> np.ndarray | None:
    """The rows of C that the reference holds and the check compares; None: all of them."""
    if n < SUBSET_FROM_N:
        return None
    return np.unique(np.linspace(0, n - 1, CHECK_ROWS).round().astype(np.int64))


def check_description(size: Size) -> str:
    rows = check_rows(size["n"])
    what = "all of C" if rows is None else f"{len(rows)} evenly spaced rows of C"
    rule = "exact" if size["dtype"] == "int8" else f"relative L2 error ≤ {TOLERANCE[size['dtype']]:g}"
    return f"{what} against float64, {rule}"


def reference(size: Size, inputs: Mapping[str, Any]) -> np.ndarray:
    # float64 BLAS for int8 too: |sum| ≤ n·64² stays far below 2^53, so it is exact (NumPy's int64 matmul has
    # no BLAS and would take minutes at n = 8192).
    rows = check_rows(size["n"])
    a = inputs["a"] if rows is None else inputs["a"][rows]
    return a.astype(np.float64) @ inputs["b"].astype(np.float64)


def check(out: np.ndarray, ref: np.ndarray, size: Size) -> tuple[bool, float]:
    rows = check_rows(size["n"])
    if rows is not None and out.ndim == 2 and out.shape[0] == size["n"]:
        out = out[rows]
    if size["dtype"] == "int8":
        ok = out.shape == ref.shape and bool(np.array_equal(out.astype(np.float64), ref))
        return ok, 0.0 if ok else float("inf")
    err = relative_error(out, ref)
    return err <= TOLERANCE[size["dtype"]], err


def output_spec(size: Size) -> tuple[tuple[int, ...], str]:
    return (size["n"], size["n"]), ("int32" if size["dtype"] == "int8" else "float32")


def flops(size: Size) -> float:
    return 2.0 * size["n"] ** 3


def nbytes(size: Size) -> float:
    n, dt = size["n"], size["dtype"]
    return float(n * n * (2 * _ITEMSIZE[dt] + _OUT_ITEMSIZE[dt]))


# ---- implementations --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def tf32_mode(matmul: bool, cudnn: bool | None = None) -> Iterator[None]:
    """Allow (or forbid) TF32 for cuBLAS matmuls (and cuDNN convolutions when ``cudnn`` is given) inside the block;
    the previous flags come back after it. The flags are read when a kernel is launched.

    Through the legacy ``allow_tf32`` setters on purpose: from torch 2.9 they also set the new ``fp32_precision``
    flags, so both stay consistent, whereas setting only the new ones leaves a mixed state in which torch raises
    when the legacy flag is read (by cuDNN, Inductor or user code)."""
    import torch

    mm, dnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (mm.allow_tf32, dnn.allow_tf32)
    mm.allow_tf32 = matmul
    if cudnn is not None:
        dnn.allow_tf32 = cudnn
    try:
        yield
    finally:
        mm.allow_tf32 = saved[0]
        if cudnn is not None:
            dnn.allow_tf32 = saved[1]


def _prepare(backend: str, b_col_major: bool = False) -> Callable[[Mapping[str, Any], Size], dict[str, Any]]:
    """Host→device: the inputs in the GEMM's dtype and layout, on ``backend``'s device (the Triton backend is on
    the CPU under TRITON_INTERPRET=1). B column-major where the kernel reads Bᵀ tiles (fp8 cuBLASLt, Triton TMA)."""

    def prepare(host: Mapping[str, Any], size: Size) -> dict[str, Any]:
        import torch

        from gpukit.bench.backends import get_backend

        device = get_backend(backend).device
        dt = size["dtype"]
        tdt = {
            "fp32": torch.float32,
            "tf32": torch.float32,
            "fp16": torch.float16,
            "bf16": torch.bfloat16,
            "fp8": torch.float8_e4m3fn,
            "int8": torch.int8,
        }[dt]
        a = torch.from_numpy(host["a"]).to(device).to(tdt)
        b = torch.from_numpy(host["b"]).to(device).to(tdt)
        if dt == "fp8" or b_col_major:
            b = b.t().contiguous().t()  # same values, column-major storage
        prepared: dict[str, Any] = {"a": a, "b": b, "published": [False]}
        if dt == "fp8":
            prepared["scale"] = torch.ones((), device=device, dtype=torch.float32)
        if device == "cuda":
            torch.cuda.synchronize()  # sync: the transfer is what the harness times here
        return prepared

    return prepare


def _publish(inputs: Mapping[str, Any], c: Any, out: Any) -> None:
    """First call only: copy the result into the harness's float32/int32 buffer for the check (see docstring)."""
    if c is not out and not inputs["published"][0]:
        out.copy_(c)
        inputs["published"][0] = True


def _torch_gemm(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
    import torch

    a, b, dt = inputs["a"], inputs["b"], size["dtype"]
    if dt in ("fp32", "tf32"):
        if not a.is_cuda:
            torch.mm(a, b, out=out)
            return
        with tf32_mode(dt == "tf32"):
            torch.mm(a, b, out=out)
        return
    if dt == "int8":
        c = torch._int_mm(a, b)
    elif dt == "fp8":
        s = inputs["scale"]
        c = torch._scaled_mm(a, b, scale_a=s, scale_b=s, out_dtype=torch.bfloat16)
    else:
        c = torch.mm(a, b)
    _publish(inputs, c, out)


# Below this n the Triton rows run one fixed tile config (one of the autotuner's own, so its compiled kernel is
# shared) instead of autotuning: at those sizes a call is launch-bound, and tuning every small shape (≈ 4 configs ×
# ~100 ms of timing, per variant) would cost more than measuring them.
AUTOTUNE_FROM_N = 1024


def _triton(variant: str) -> Callable[[Mapping[str, Any], Any, Size], None]:
    def fn(inputs: Mapping[str, Any], out: Any, size: Size) -> None:
        import os

        from gpukit.bench.kernels.triton_gemm import autotune_configs, matmul

        config = None  # autotuned; the interpreter picks its own small tile
        if size["n"] < AUTOTUNE_FROM_N and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            config = autotune_configs()[-1]
        _publish(inputs, matmul(inputs["a"], inputs["b"], variant=variant, config=config), out)

    return fn


def _cpu_supports(size: Size) -> str | None:
    dt, feats = size["dtype"], cpu_matrix_features()
    if dt not in CPU_DTYPES:
        return f"{dt} GEMM runs on GPUs only here"
    if dt == "bf16" and not feats & {"avx512_bf16", "amx_bf16"}:
        return "this CPU has no bf16 matrix instructions (AVX512-BF16 / AMX-BF16)"
    if dt == "int8" and not feats & {"avx512_vnni", "avx_vnni", "amx_int8"}:
        return "this CPU has no int8 dot-product instructions (VNNI / AMX-INT8)"
    return None


def _cuda_supports(size: Size) -> str | None:
    import torch

    major, minor = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
    if size["dtype"] == "fp8" and (major, minor) < (8, 9):
        return f"fp8 tensor cores need sm_89+ (this GPU is sm_{major}{minor})"
    if size["dtype"] == "bf16" and major and major < 8:
        return f"bf16 tensor cores need sm_80+ (this GPU is sm_{major}{minor})"
    if size["dtype"] == "int8" and size["n"] % 8:
        return "torch._int_mm needs n divisible by 8"
    return None


def _triton_supports(size: Size) -> str | None:
    return None if size["dtype"] in ("fp16", "bf16") else "the Triton kernel takes fp16/bf16 inputs"


CPU_PROBE_N = 512  # the GEMM the CPU estimate is timed on: ~0.27 GFLOP, milliseconds on any CPU with the dtype


def _cpu_estimate(size: Size) -> float:
    """One CPU call at the rate a 512³ GEMM of the same dtype runs here, through the same path (the fastest of a
    few timed calls): a fixed guess of the rate (500 GFLOP/s fp32, 50 bf16 without AMX) was 19× too fast on a
    loaded 2-core machine and many times too slow for bf16 on a 16-core AMX host, skipping a row that ran in 0.4 s.
    The rate only grows with n, so for larger GEMMs this errs long, never short of what a skip needs."""
    from gpukit.bench.backends import get_backend
    from gpukit.bench.workloads._common import calibrated_seconds_per_unit

    probe = parse_size(f"{CPU_PROBE_N}:{size['dtype']}")
    key = f"gemm:torch-cpu:{probe.label}"
    inputs = _prepare("torch-cpu")(make_inputs(probe, np.random.default_rng(0)), probe)
    shape, dtype = output_spec(probe)
    out = get_backend("torch-cpu").poisoned(shape, dtype)

    def run() -> None:
        _torch_gemm(inputs, out, probe)

    return calibrated_seconds_per_unit(key, run, flops(probe), warm=run) * flops(size)


WORKLOAD = Workload(
    name="gemm",
    description="C = A @ B, n×n, per dtype: cuBLAS (fp32, tf32, fp16, bf16, fp8, int8), Triton, CPU",
    unit="tflops",
    sizes=sizes,
    parse_size=parse_size,
    make_inputs=make_inputs,
    reference=reference,
    check=check,
    output_spec=output_spec,
    flops=flops,
    bytes=nbytes,
    amount=lambda size, ref: flops(size),
    ceiling=None,  # compute-bound: compared with the cuBLAS rate per dtype measured in the same run (annotate)
    tolerance=lambda size: TOLERANCE[size["dtype"]],
    implementations={
        "torch-cpu": Implementation(
            "torch-cpu",
            _torch_gemm,
            supports=_cpu_supports,
            estimate_s=_cpu_estimate,
            prepare=_prepare("torch-cpu"),
            note="oneDNN/MKL through torch.mm",
        ),
        "cublas": Implementation(
            "torch-cuda",
            _torch_gemm,
            supports=_cuda_supports,
            prepare=_prepare("torch-cuda"),
            note="torch.mm / _scaled_mm / _int_mm → cuBLAS(Lt)",
        ),
        "triton": Implementation(
            "triton",
            _triton("auto"),
            supports=_triton_supports,
            prepare=_prepare("triton", b_col_major=True),
            note="tiled, autotuned from n = 1024; TMA loads on sm_90+ (B column-major)",
        ),
        "triton-ptr": Implementation(
            "triton",
            _triton("ptr"),
            supports=_triton_supports,
            prepare=_prepare("triton"),
            note="tiled, autotuned from n = 1024; pointer loads (tutorial 03)",
        ),
    },
)


def measured_rates(results: Sequence[Result]) -> dict[str, float]:
    """Per dtype, the best cuBLAS GEMM rate in TFLOP/s among ``results``: the vendor library's ceiling in this run."""
    best: dict[str, float] = {}
    for r in results:
        if r.workload == "gemm" and r.backend == "cublas" and r.ok and r.tflops:
            dt = r.size.partition(":")[2]
            best[dt] = max(best.get(dt, 0.0), r.tflops)
    return best


def annotate(results: Sequence[Result]) -> None:
    """Fill ``pct_of_ceiling`` of every GPU gemm row against the best cuBLAS rate of its dtype in the same run;
    ``ceiling`` names it (``gemm_<dtype>_cublas_tflops``). CPU rows are left alone (no CPU GEMM ceiling here)."""
    rates = measured_rates(results)
    for r in results:
        if r.workload != "gemm" or r.device == "cpu" or not r.ok or not r.tflops:
            continue
        dt = r.size.partition(":")[2]
        if rates.get(dt):
            r.ceiling, r.pct_of_ceiling = f"gemm_{dt}_cublas_tflops", 100.0 * r.tflops / rates[dt]


def _republish(inputs: Mapping[str, Any]) -> None:
    inputs["published"][0] = False


WORKLOAD.annotate = annotate  # analyse's hook: % of the cuBLAS rate of the same dtype, same run
WORKLOAD.republish = _republish  # the harness checks one more call after the timed ones
