"""Framework probes run for real in child interpreters, against fake packages put first on PYTHONPATH."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpukit.hardware import stack
from gpukit.hardware.checks import check_frameworks
from gpukit.hardware.facts import Facts
from gpukit.hardware.gpu import GpuInfo


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory first on the children's PYTHONPATH (and on ours, so find_spec sees its packages)."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_numba_cuda_numpy_25_clash_is_diagnosed_end_to_end(fake_site: Path):
    # The reference H200: `from numba import cuda` works, but the kernel lowering it loads at the first @cuda.jit
    # compile (numba_cuda/numba/cuda/np/arrayobj.py) calls np.row_stack, which numpy 2.5 removed.
    numpy_25 = (
        "__version__ = '2.5.2'\n"
        "def __getattr__(name):\n"
        "    raise AttributeError(f\"module 'numpy' has no attribute '{name}'\")\n"
    )
    write(fake_site, "numpy/__init__.py", numpy_25)
    # (imports importlib.util first: the real numba-cuda's import redirector for "numba.cuda" assumes it is loaded)
    write(fake_site, "numba/__init__.py", "import importlib.util\n\n__version__ = '0.61.2'\n")
    write(fake_site, "numba/cuda/__init__.py", "def is_available():\n    return False\n")
    write(fake_site, "numba/cuda/cudaimpl.py", "import numba_cuda.arrayobj\n")
    write(fake_site, "numba_cuda/__init__.py", "__version__ = '0.30.4'\n")
    write(fake_site, "numba_cuda/arrayobj.py", "import numpy as np\n\noverload = np.row_stack\n")
    metadata = "Metadata-Version: 2.1\nName: numba-cuda\nVersion: 0.30.4\n"
    write(fake_site, "numba_cuda-0.30.4.dist-info/METADATA", metadata)
    write(fake_site, "numba_cuda-0.30.4.dist-info/top_level.txt", "numba_cuda\n")

    probe = stack.probe_framework("numba", timeout_s=60)
    assert probe.probed and probe.importable is True and probe.failed_stage == "kernel"
    assert probe.error == "AttributeError: module 'numpy' has no attribute 'row_stack'"
    assert probe.numpy_version == "2.5.2"
    assert probe.culprit is not None
    assert probe.culprit["distribution"] == "numba-cuda" and probe.culprit["distribution_version"] == "0.30.4"
    assert probe.culprit["file"].endswith("arrayobj.py") and probe.culprit["line"] == 3

    gpus = (GpuInfo(0, "NVIDIA H200"),)
    finding = check_frameworks(Facts(gpus=gpus, frameworks=(probe,)))[0]
    assert finding.level == "FAIL" and "kernel" in finding.message
    assert "numba-cuda 0.30.4" in finding.message and "numpy 2.5.2" in finding.message
    assert 'pip install "numpy<2.5"' in (finding.hint or "")
    # no GPU at all: still a FAIL, the pairing is broken whatever the hardware
    assert check_frameworks(Facts(frameworks=(probe,)))[0].level == "FAIL"


def test_hanging_import_times_out(fake_site: Path):
    write(fake_site, "mxnet/__init__.py", "import time\ntime.sleep(60)\n")
    start = time.perf_counter()
    probe = stack.probe_framework("mxnet", timeout_s=1.5)
    assert time.perf_counter() - start < 10
    assert probe.timed_out and probe.importable is False
    assert "did not finish" in (probe.error or "")


def test_import_that_kills_the_interpreter_is_reported(fake_site: Path):
    write(fake_site, "paddle/__init__.py", "import os, sys\nsys.stderr.write('fatal: bad cuda\\n')\nos._exit(3)\n")
    probe = stack.probe_framework("paddle", timeout_s=30)
    assert probe.importable is False and "code 3" in (probe.error or "") and "fatal: bad cuda" in (probe.error or "")


def test_gpu_query_failure_after_import_is_not_an_import_failure(fake_site: Path):
    write(fake_site, "jax/__init__.py", "__version__ = '0.7.0'\ndef devices():\n    raise RuntimeError('no CUDA')\n")
    probe = stack.probe_framework("jax", timeout_s=30)
    assert probe.importable is True and probe.sees_gpu is False and "no CUDA" in (probe.error or "")
    assert probe.failed_stage == "gpu_query"


def test_probes_run_concurrently(fake_site: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("jax", "tensorflow"):
        write(fake_site, f"{name}/__init__.py", "import time\ntime.sleep(3.0)\n__version__ = '1.0'\n")
    monkeypatch.setattr(stack, "FRAMEWORKS", {k: stack.FRAMEWORKS[k] for k in ("jax", "tensorflow", "mxnet")})
    start = time.perf_counter()
    probes = stack.probe_frameworks(True, timeout_s=30)
    elapsed = time.perf_counter() - start
    assert [p.name for p in probes] == ["jax", "tensorflow", "mxnet"]
    assert probes[2].installed is False and probes[2].probed is False
    assert all(p.probed and p.seconds and p.seconds >= 3.0 for p in probes[:2])
    # One after the other takes at least 6 s; side by side 3 s plus two interpreter start-ups, which a loaded
    # 2-core CI machine can stretch to a second or two each (a 1.5 s sleep and a 2.9 s bound failed there).
    assert elapsed < 5.9, f"probes ran one after the other ({elapsed:.1f} s)"


def test_not_installed_is_not_probed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(stack, "_installed", lambda module: False)
    p = stack.probe_framework("mxnet")
    assert p.installed is False and p.probed is False and p.importable is None


def test_no_probe_reads_torch_build_without_importing():
    text = "__version__ = '2.11.0+cu128'\ncuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n"
    assert stack.parse_torch_version_py(text) == {"build": "cuda", "cuda_runtime": "12.8", "hip_runtime": None}
    cpu = "__version__ = '2.11.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
    assert stack.parse_torch_version_py(cpu)["build"] == "cpu"
    rocm = "cuda = None\nhip = '6.2.41133'\n"
    assert stack.parse_torch_version_py(rocm)["build"] == "rocm"


def test_parse_nvcc_version():
    out = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n"
    assert stack.parse_nvcc_version(out) == "12.4"
    assert stack.parse_nvcc_version("garbage") is None


def test_find_toolkits(tmp_path: Path):
    (tmp_path / "cuda-12.3" / "bin").mkdir(parents=True)
    (tmp_path / "cuda-12.3" / "bin" / "nvcc").write_text("")
    (tmp_path / "cuda-11.0").mkdir()  # no nvcc: not a toolkit
    assert stack.find_toolkits(str(tmp_path / "cuda*")) == (str(tmp_path / "cuda-12.3"),)
