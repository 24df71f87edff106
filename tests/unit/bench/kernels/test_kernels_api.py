"""The kernel modules' edges: import hygiene, missing backends, device checks, and the CUDA C source compiling."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from kernels_subproc import run_json

from gpukit.errors import BackendUnavailable, WorkloadError

CU = Path(str(resources.files("gpukit.bench.kernels").joinpath("kernels.cu")))


def _nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))
    return candidates[-1] if candidates else None


def test_importing_the_kernel_modules_imports_no_gpu_stack() -> None:
    body = """
    import json, sys
    import gpukit.bench.kernels
    from gpukit.bench.kernels import cpu, cuda_c, numba_cuda, triton_kernels
    heavy = ("cupy", "numba.cuda", "triton", "torch", "numba")
    print(json.dumps({m: m in sys.modules for m in heavy}))
    """
    loaded = run_json(body, {})
    assert loaded == {"cupy": False, "numba.cuda": False, "triton": False, "torch": False, "numba": False}


def test_cuda_c_without_cupy_is_unavailable_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpukit.bench.kernels import cuda_c

    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError
    with pytest.raises(BackendUnavailable) as info:
        cuda_c.vector_add(None, None, None)
    assert "cupy-cuda12x" in (info.value.hint or "") and "cupy-cuda13x" in (info.value.hint or "")


def test_numba_cuda_import_failure_names_numpy_and_numba_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    from gpukit.bench.kernels import numba_cuda

    monkeypatch.delattr(numba, "cuda", raising=False)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    with pytest.raises(BackendUnavailable) as info:
        numba_cuda._cuda()
    assert "numpy" in info.value.message and "numba-cuda" in info.value.message
    assert "numpy<2.5" in (info.value.hint or "")


def test_triton_missing_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpukit.bench.kernels import triton_kernels

    monkeypatch.setitem(sys.modules, "gpukit.bench.kernels._triton_jit", None)
    with pytest.raises(BackendUnavailable, match="triton"):
        triton_kernels._jit()


def test_triton_kernels_refuse_cpu_tensors_unless_interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from gpukit.bench.kernels import triton_kernels

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.zeros(8)
    with pytest.raises(WorkloadError, match="CUDA tensors") as info:
        triton_kernels.vector_add(x, x, torch.zeros(8))
    assert "TRITON_INTERPRET" in (info.value.hint or "")


def test_every_launched_cuda_c_kernel_is_defined_in_the_source() -> None:
    from gpukit.bench.kernels import cuda_c

    wrapper = Path(cuda_c.__file__).read_text(encoding="utf-8")
    launched = set(re.findall(r'"((?:vector_add|saxpy|mandelbrot)\w*_(?:f32|i32))"', wrapper))
    defined = set(
        re.findall(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(', cuda_c.source_text())
    )
    assert launched == {
        "vector_add_f32",
        "vector_add_i32",
        "vector_add_naive_f32",
        "vector_add_naive_i32",
        "saxpy_f32",
        "mandelbrot_f32",
        "mandelbrot_naive_f32",
    }
    assert launched <= defined


@pytest.mark.skipif(_nvcc() is None, reason="nvcc not found on PATH or in /usr/local/cuda*/bin (CI has no CUDA)")
def test_cuda_c_source_compiles_for_sm90_without_spills(tmp_path: Path) -> None:
    nvcc = _nvcc()
    assert nvcc is not None
    proc = subprocess.run(
        [nvcc, "-c", "-arch=sm_90", "-Xptxas", "-v", str(CU), "-o", str(tmp_path / "kernels.o")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = proc.stderr
    assert (tmp_path / "kernels.o").stat().st_size > 0
    assert len(re.findall(r"Compiling entry function '(\w+)'", report)) == 8  # 7 kernels + the timing pad
    assert re.findall(r"(\d+) bytes spill stores", report) == ["0"] * 8
    # The streaming kernels must fit 8 blocks of 128 threads per SM (__launch_bounds__): at most 64 registers each.
    regs = dict(re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", report, re.S))
    for name in ("vector_add_f32", "vector_add_i32", "saxpy_f32"):
        assert int(regs[name]) <= 64, (name, regs[name])


def _libnvrtc() -> Path | None:
    """libnvrtc from the CUDA pip wheels torch/cupy bring, or from a toolkit."""
    import site

    roots = [*site.getsitepackages(), "/usr/local"]
    patterns = ["nvidia/cu13/lib/libnvrtc.so.*", "nvidia/cuda_nvrtc/lib/libnvrtc.so.*", "cuda*/lib64/libnvrtc.so.*"]
    for root in roots:
        for pat in patterns:
            hits = sorted(p for p in Path(root).glob(pat) if "builtins" not in p.name and "alt" not in p.name)
            if hits:
                return hits[-1]
    return None


@pytest.mark.skipif(_libnvrtc() is None, reason="no libnvrtc here (it comes with CUDA wheels or a toolkit)")
def test_cuda_c_source_compiles_with_nvrtc_like_cupy() -> None:
    """The run-time path: NVRTC with the options cuda_c.py gives cupy.RawModule, for sm_90."""
    lib = _libnvrtc()
    assert lib is not None
    body = f"""
    import ctypes, json
    from gpukit.bench.kernels import cuda_c
    nvrtc = ctypes.CDLL({str(lib)!r})
    prog = ctypes.c_void_p()
    src = cuda_c.source_text().encode()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"kernels.cu", 0, None, None) == 0
    opts = [o.encode() for o in (*cuda_c.NVRTC_OPTIONS, "--gpu-architecture=sm_90")]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    print(json.dumps({{"rc": rc, "log": log.value.decode(errors="replace")}}))
    """
    result = run_json(body, {"LD_LIBRARY_PATH": str(lib.parent)})
    assert result["rc"] == 0, result["log"]
