"""The Triton GEMM under TRITON_INTERPRET=1 (in a subprocess: the flag is read when triton.jit decorates)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[3] / "src"

SCRIPT = r"""
import json, torch
from gpukit.bench.kernels.triton_gemm import GemmConfig, matmul
from gpukit.errors import ConfigError
torch.manual_seed(0)
cfg = GemmConfig(16, 16, 16, group_m=2, num_stages=1, num_warps=1)
out = {}
# ragged shapes: edge tiles in M, N and K (K and N multiples of 8 keep 16-byte strides for the TMA variant);
# B row-major and column-major (the TMA variant reads Bᵀ: a view for column-major B, a copy otherwise)
cases = (("ptr", (33, 17, 50), False), ("ptr", (64, 48, 32), True), ("tma", (40, 24, 56), False),
         ("tma", (64, 64, 64), True), ("tma", (48, 40, 72), True))
for variant, (m, n, k), col in cases:
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(k, n, dtype=torch.float16)
    if col:
        b = b.t().contiguous().t()
    c = matmul(a, b, variant=variant, config=cfg)
    ref = a.double() @ b.double()
    key = f"{variant}-{m}x{n}x{k}-{'col' if col else 'row'}"
    out[key] = [list(c.shape), str(c.dtype), float((c.double() - ref).norm() / ref.norm())]
errors = []
bad_inputs = (
    (torch.randn(4, 5), torch.randn(5, 4)),
    (torch.randn(4, 5).half(), torch.randn(6, 4).half()),
    (torch.randn(4, 5).half(), torch.randn(5, 4).bfloat16()),
    (torch.randn(4, 5, 2).half(), torch.randn(5, 4).half()),
)
for bad in bad_inputs:
    try:
        matmul(*bad, config=cfg)
    except ConfigError as exc:
        errors.append(exc.message)
try:
    matmul(torch.randn(16, 16).half(), torch.randn(16, 16).half(), variant="tma", config=cfg)
    errors.append("tma ok")
except ConfigError as exc:
    errors.append(exc.message)
print(json.dumps({"results": out, "errors": errors}))
"""


def test_triton_gemm_matches_float64_reference_under_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(doc["results"]) == 5
    for name, (shape, dtype, rel_err) in doc["results"].items():
        m, n, _ = (int(x) for x in name.split("-")[1].split("x"))
        assert name.split("-")[2] in ("row", "col")
        assert shape == [m, n], name
        assert dtype == "torch.float16"
        assert rel_err < 1e-3, f"{name}: relative error {rel_err}"  # fp16 inputs, fp32 accumulation
    errors = doc["errors"]
    assert len(errors) == 5
    assert "fp16 or two bf16" in errors[0]  # fp32 rejected
    assert "inner dimensions differ" in errors[1]
    assert "fp16 or two bf16" in errors[2]  # mixed dtypes rejected
    assert "2-D" in errors[3]
    assert errors[4] == "tma ok"  # the interpreter emulates tensor descriptors
