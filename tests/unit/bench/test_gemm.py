"""gemm workload: sizes, per-dtype checks, CPU rows through the real harness, honest skips, the Triton rows under
the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpukit.bench.harness import Settings, prepare, run_one
from gpukit.bench.workloads import gemm
from gpukit.bench.workloads.gemm import TOLERANCE, WORKLOAD
from gpukit.errors import ConfigError

torch = pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[3] / "src"
FAST = Settings(noise_target=0.0, repeats=3, warmup=1, budget_s=5.0, target_sample_s=1e-4)


def test_sizes_and_parsing():
    s = WORKLOAD.parse_size("4096:bf16")
    assert (s.label, s["n"], s["dtype"]) == ("4096:bf16", 4096, "bf16")
    assert WORKLOAD.parse_size("512").label == "512:fp32"
    for bad in ("abc", "4096:fp64", "8:fp32"):
        with pytest.raises(ConfigError):
            WORKLOAD.parse_size(bad)
    labels = [s.label for s in WORKLOAD.sizes(False)]
    assert "8192:bf16" in labels and "256:fp8" in labels and len(labels) == 36
    assert WORKLOAD.flops(s) == 2 * 4096**3
    assert WORKLOAD.bytes(s) == 3 * 4096 * 4096 * 2
    assert WORKLOAD.bytes(WORKLOAD.parse_size("1024:int8")) == 1024 * 1024 * (1 + 1 + 4)


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16", "fp8"])
def test_inputs_are_representable_and_the_check_has_per_dtype_tolerance(dtype):
    size = WORKLOAD.parse_size(f"64:{dtype}")
    inputs = WORKLOAD.make_inputs(size, np.random.default_rng(0))
    assert inputs["a"].dtype == np.float32 and np.count_nonzero(inputs["a"]) > 0.99 * inputs["a"].size
    # rounding again to the dtype changes nothing: the reference sees exactly what the GEMM sees
    np.testing.assert_array_equal(gemm._round_to(inputs["a"], dtype), inputs["a"])
    ref = WORKLOAD.reference(size, inputs)
    assert WORKLOAD.check(ref.astype(np.float32), ref, size)[0]
    tol = TOLERANCE[dtype]
    assert WORKLOAD.tolerance(size) == tol
    noisy = ref * (1 + 3 * tol)  # relative error 3× the tolerance
    assert not WORKLOAD.check(noisy, ref, size)[0]
    poisoned = ref.copy()
    poisoned[3, 5] = np.nan  # an unwritten element
    ok, err = WORKLOAD.check(poisoned, ref, size)
    assert not ok and err == float("inf")


def test_int8_is_exact():
    size = WORKLOAD.parse_size("64:int8")
    inputs = WORKLOAD.make_inputs(size, np.random.default_rng(0))
    ref = WORKLOAD.reference(size, inputs)
    exact = inputs["a"].astype(np.int32) @ inputs["b"].astype(np.int32)
    assert WORKLOAD.check(exact, ref, size) == (True, 0.0)
    off = exact.copy()
    off[0, 0] += 1
    assert not WORKLOAD.check(off, ref, size)[0]


def _run(label: str, impl: str):
    size = WORKLOAD.parse_size(label)
    return run_one(WORKLOAD, impl, size, prepare(WORKLOAD, size, np.random.default_rng(1)), FAST)


def test_cpu_fp32_row_is_checked_and_timed():
    r = _run("96:fp32", "torch-cpu")
    assert r.status == "ok", r.reason
    assert r.check is True and r.error < 1e-5 and r.tolerance == TOLERANCE["fp32"]
    assert r.tflops == pytest.approx(2 * 96**3 / r.kernel_median_s / 1e12)
    assert r.h2d_s is not None and r.compile_s is not None


def test_cpu_rows_skip_with_the_reason(monkeypatch):
    assert "GPUs only" in _run("64:fp16", "torch-cpu").reason
    monkeypatch.setattr(gemm, "cpu_matrix_features", lambda: frozenset())
    bf16, int8 = _run("64:bf16", "torch-cpu"), _run("64:int8", "torch-cpu")
    assert bf16.status == "skipped" and "AVX512-BF16 / AMX-BF16" in bf16.reason
    assert int8.status == "skipped" and "VNNI / AMX-INT8" in int8.reason
    monkeypatch.setattr(gemm, "cpu_matrix_features", lambda: frozenset({"avx512_bf16", "avx512_vnni"}))
    bf16, int8 = _run("64:bf16", "torch-cpu"), _run("64:int8", "torch-cpu")
    assert bf16.status == "ok" and bf16.error < TOLERANCE["bf16"], bf16.reason
    assert int8.status == "ok" and int8.error == 0.0, int8.reason


def test_low_precision_result_is_published_once_so_the_cast_is_never_timed():
    size = WORKLOAD.parse_size("32:bf16")
    host = WORKLOAD.make_inputs(size, np.random.default_rng(2))
    prepared = WORKLOAD.implementations["torch-cpu"].prepare(host, size)
    assert prepared["a"].dtype == torch.bfloat16
    out = torch.full((32, 32), float("nan"))
    gemm._torch_gemm(prepared, out, size)
    assert not torch.isnan(out).any()
    out.fill_(float("nan"))
    gemm._torch_gemm(prepared, out, size)  # a timed call: the GEMM alone
    assert torch.isnan(out).all()


def test_cpu_matrix_features_reads_cpuinfo():
    feats = gemm.cpu_matrix_features()
    assert feats <= {"avx512_bf16", "amx_bf16", "amx_int8", "avx512_vnni", "avx_vnni", "amx_tile"}
    if Path("/proc/cpuinfo").exists() and "avx512_vnni" in Path("/proc/cpuinfo").read_text():
        assert "avx512_vnni" in feats


SCRIPT = r"""
import json
from gpukit.bench import run
r = run(["gemm"], backends=["triton", "triton-ptr"], sizes=["48:fp16", "48:fp32"], quick=True, ceilings=False, seed=3)
print(json.dumps([[x.backend, x.size, x.status, x.reason, x.error] for x in r.results]))
"""


def test_triton_rows_through_the_harness_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {(b, s): (st, why, err) for b, s, st, why, err in json.loads(proc.stdout.strip().splitlines()[-1])}
    for impl in ("triton", "triton-ptr"):
        status, why, err = rows[(impl, "48:fp16")]
        assert status == "ok", why
        assert err < TOLERANCE["fp16"]
        assert rows[(impl, "48:fp32")][:2] == ("skipped", "the Triton kernel takes fp16/bf16 inputs")
