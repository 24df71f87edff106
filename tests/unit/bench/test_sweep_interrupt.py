"""The bench CLI's interrupt handling: a signal always becomes KeyboardInterrupt at a row boundary, even when a
native library replaced the SIGINT disposition or a framework swallowed the first KeyboardInterrupt."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from gpukit.bench.sweep import SWEEP_SIZES
from gpukit.bench.workloads import gemm
from gpukit.cli.bench import _interruptible


def test_rearm_overrides_a_library_that_reset_sigint_to_the_default():
    before = signal.getsignal(signal.SIGINT)
    with _interruptible() as rearm:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # what a native library may do: the default kills the process
        rearm()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
    assert signal.getsignal(signal.SIGINT) is before


def test_a_swallowed_interrupt_is_raised_again_before_the_next_row():
    with _interruptible() as rearm:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
        except KeyboardInterrupt:
            pass  # a framework catching it (the row would become "failed" and the run go on)
        with pytest.raises(KeyboardInterrupt):
            rearm()
        os.kill(os.getpid(), signal.SIGINT)  # a second signal (while saving) is only noted, never raised
        for _ in range(1000):
            pass


def test_gemm_reference_covers_a_row_subset_from_2048_and_the_check_uses_those_rows():
    size = gemm.parse_size("2048:fp32")
    rows = gemm.check_rows(2048)
    assert rows is not None and len(rows) == gemm.CHECK_ROWS and rows[0] == 0 and rows[-1] == 2047
    assert gemm.check_rows(1024) is None
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 64)).astype(np.float32)
    inputs = {"a": np.zeros((2048, 2048), np.float32), "b": np.zeros((2048, 2048), np.float32)}
    inputs["a"][:, :64], inputs["b"][:64, :] = a, rng.standard_normal((64, 2048)).astype(np.float32)
    ref = gemm.reference(size, inputs)
    assert ref.shape == (len(rows), 2048)
    out = (inputs["a"].astype(np.float64) @ inputs["b"]).astype(np.float32)
    assert gemm.check(out, ref, size)[0]
    out[rows[5], 7] += 1000.0  # a wrong element in a checked row fails
    assert not gemm.check(out, ref, size)[0]
    assert "256 evenly spaced rows" in gemm.check_description(size)


def test_sweep_ladders_show_a_crossover_for_the_cpu_dtypes_and_bf16_8192_for_cublas_vs_triton():
    g = SWEEP_SIZES["gemm"]
    for dt in ("fp32", "bf16"):
        assert [s for s in g if s.endswith(f":{dt}") and int(s.split(":")[0]) <= 4096] == [
            f"{n}:{dt}" for n in (64, 128, 256, 512, 1024, 2048, 4096)
        ]
    assert "8192:bf16" in g and "8192:fp32" not in g
    assert {s for s in g if s.startswith("4096:")} >= {"4096:tf32", "4096:fp16", "4096:fp8", "4096:int8"}
    assert [s for s in SWEEP_SIZES["cnn-train"] if s.endswith(":fp32")] == [
        "1:fp32",
        "8:fp32",
        "32:fp32",
        "128:fp32",
        "512:fp32",
    ]
