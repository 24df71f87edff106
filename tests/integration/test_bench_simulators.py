"""GPU backends exercised on the CPU: Numba CUDA through its simulator, Triton through its interpreter.

Each runs in a subprocess because both switches must be set before numba.cuda / triton are first imported.
The sizes are tiny: the point is that every workload's wiring produces *verified* results through these backends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

SCRIPT = """
import json
from gpukit.bench import run
rows = []
for workload, sizes in [("vector-add", ["1000", "1000:int32", "seed"]), ("saxpy", ["1000"]),
                        ("mandelbrot", ["48x32x30"]), ("bandwidth", ["4KiB"])]:
    r = run(workload, backends=[{backend!r}], sizes=sizes, ceilings=False, repeat=2)
    rows += [x.to_dict() for x in r.results]
print(json.dumps(rows))
"""


def _run(backend: str, env_var: str) -> list[dict]:  # type: ignore[type-arg]
    env = {**os.environ, env_var: "1", "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(backend=backend)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("backend", "env_var", "expected"),
    [
        ("numba-cuda", "NUMBA_ENABLE_CUDASIM", {"vector-add": 3, "saxpy": 1, "mandelbrot": 2, "bandwidth": 1}),
        ("triton", "TRITON_INTERPRET", {"vector-add": 3, "saxpy": 1, "mandelbrot": 1}),
    ],
)
def test_gpu_backend_on_cpu_stand_in_is_verified(backend: str, env_var: str, expected: dict[str, int]) -> None:
    rows = _run(backend, env_var)
    for row in rows:
        assert row["status"] == "ok", (row["backend"], row["size"], row["reason"])
        assert row["check"] is True
        assert row["device"] == "cpu"  # a stand-in: never reported as a GPU number
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["workload"]] = counts.get(row["workload"], 0) + 1
    assert counts == expected
    seed = [r for r in rows if r["size"] == "seed-example"]
    assert seed and all(r["output_preview"] == [8, 10, 12, 14, 16, 18] for r in seed)


def test_numba_timing_pad_kernel_runs_in_the_simulator() -> None:
    """The Numba spin kernel queued ahead of each GPU sample: n dependent multiply-adds from the scratch value, so
    after n steps from 0 it holds (1 − 0.999ⁿ) / 0.001, and numba's one-thread occupancy warning is kept quiet."""
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "from gpukit.bench.kernels import numba_cuda\n"
        "numba_cuda.spin(50)\n"
        "kernel, scratch = numba_cuda._spin_kernel()\n"
        "print(scratch.copy_to_host()[0])\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(SRC)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert float(proc.stdout.strip()) == pytest.approx((1 - 0.999**50) / 0.001, rel=1e-12)
