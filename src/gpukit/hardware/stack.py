"""The software stack: OS, kernel, Python, driver and the CUDA it supports, nvcc and toolkits, and every GPU
framework that is installed — each probed in its own child interpreter, all at once, with a timeout.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

__all__ = [
    "FRAMEWORKS",
    "FrameworkProbe",
    "Stack",
    "dist_version",
    "find_toolkits",
    "parse_nvcc_version",
    "parse_torch_version_py",
    "probe_framework",
    "probe_frameworks",
    "read_stack",
    "torch_build_static",
]

DEFAULT_PROBE_TIMEOUT_S = 60.0

# framework → (module that find_spec checks, distributions whose version names it, first found wins)
FRAMEWORKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "torch": ("torch", ("torch",)),
    "numba": ("numba", ("numba",)),
    "cupy": ("cupy", ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy-rocm-6-0")),
    "triton": ("triton", ("triton", "pytorch-triton", "pytorch-triton-rocm")),
    "jax": ("jax", ("jax",)),
    "tensorflow": ("tensorflow", ("tensorflow", "tensorflow-cpu", "tf-nightly")),
    "paddle": ("paddle", ("paddlepaddle-gpu", "paddlepaddle")),
    "mxnet": ("mxnet", ("mxnet", "mxnet-cu112", "mxnet-cu117")),
}


@dataclass(frozen=True)
class FrameworkProbe:
    name: str
    installed: bool
    version: str | None = None  # installed distribution version (metadata), or what the import reported
    distribution: str | None = None
    probed: bool = False  # False when probing was skipped (--no-probe) or the framework is not installed
    importable: bool | None = None
    sees_gpu: bool | None = None
    device_count: int | None = None
    error: str | None = None  # "AttributeError: module 'numpy' has no attribute 'row_stack'"
    failed_stage: str | None = None  # where it failed: "import", "gpu_query" (asking for devices) or "kernel"
    kernel_ok: bool | None = None  # a tiny test kernel ran and gave the right answer (numba, cupy, torch)
    culprit: dict[str, Any] | None = None  # innermost failing frame outside numpy: file, line, code
    numpy_version: str | None = None  # the numpy the probe's interpreter imported
    timed_out: bool = False
    seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)  # build, cuda_runtime, cudnn, nccl, devices, ...

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Stack:
    os: str
    kernel: str
    python: str
    python_executable: str
    numpy: str | None
    driver_version: str | None
    cuda_driver_version: str | None  # highest CUDA the driver supports, e.g. "12.8"
    nvcc_path: str | None
    nvcc_version: str | None
    cuda_toolkits: tuple[str, ...]  # toolkit roots with bin/nvcc, e.g. /usr/local/cuda-12.3
    cuda_visible_devices: str | None
    ld_library_path: str | None
    frameworks: tuple[FrameworkProbe, ...] = ()

    def framework(self, name: str) -> FrameworkProbe | None:
        return next((f for f in self.frameworks if f.name == name), None)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["cuda_toolkits"] = list(self.cuda_toolkits)
        d["frameworks"] = {f.name: f.to_dict() for f in self.frameworks}
        return d


def dist_version(*names: str) -> tuple[str | None, str | None]:
    """(distribution, version) of the first of ``names`` that is installed, else (None, None)."""
    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None, None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _probe_source() -> str:
    return resources.files("gpukit.hardware").joinpath("_probe_script.py").read_text(encoding="utf-8")


def parse_probe_output(name: str, stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("GPUKIT_PROBE "):
            try:
                data = json.loads(line[len("GPUKIT_PROBE ") :])
            except json.JSONDecodeError:
                return None
            return data if isinstance(data, dict) else None
    return None


def torch_build_static() -> dict[str, Any]:
    """torch's build (cuda / rocm / cpu) and CUDA runtime read from torch/version.py without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    text = ""
    for loc in spec.submodule_search_locations:
        try:
            text = (Path(loc) / "version.py").read_text(encoding="utf-8")
            break
        except OSError:
            continue
    return parse_torch_version_py(text) if text else {}


def parse_torch_version_py(text: str) -> dict[str, Any]:
    values: dict[str, str | None] = {}
    for key in ("cuda", "hip"):
        m = re.search(rf"^{key}\b[^=]*=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.MULTILINE)
        values[key] = (m.group(1) or m.group(2)) if m else None
    build = "cuda" if values["cuda"] else ("rocm" if values["hip"] else "cpu")
    return {"build": build, "cuda_runtime": values["cuda"], "hip_runtime": values["hip"]}


def _base(name: str) -> FrameworkProbe:
    module, dists = FRAMEWORKS[name]
    dist, version = dist_version(*dists)
    installed = _installed(module)
    details: dict[str, Any] = {}
    if installed and name == "torch":
        details = torch_build_static()
    if installed and name == "numba":
        details = {"numba_cuda": dist_version("numba-cuda")[1]}
    return FrameworkProbe(name=name, installed=installed, version=version, distribution=dist, details=details)


def probe_framework(name: str, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> FrameworkProbe:
    """Import ``name`` in a child interpreter and ask whether it sees a GPU; never raises."""
    base = _base(name)
    if not base.installed:
        return base
    # jax and tensorflow grab most of the GPU memory when they start unless told not to
    env = dict(
        os.environ,
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONUNBUFFERED="1",
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
        TF_FORCE_GPU_ALLOW_GROWTH="true",
    )
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _probe_source(), name],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _merge(base, {"error": f"import did not finish within {timeout_s:.0f} s"}, timed_out=True)
    except OSError as exc:
        return _merge(base, {"error": f"could not start {sys.executable}: {exc}"})
    data = parse_probe_output(name, proc.stdout)
    if data is None:  # killed by a signal or crashed in C code before answering
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        data = {"error": f"probe exited with code {proc.returncode}: {' | '.join(tail)}"[:800]}
    data.setdefault("seconds", round(time.perf_counter() - start, 3))
    return _merge(base, data)


_TOP_LEVEL = {
    "name",
    "version",
    "importable",
    "sees_gpu",
    "device_count",
    "error",
    "failed_stage",
    "kernel_ok",
    "culprit",
    "numpy_version",
}


def _merge(base: FrameworkProbe, data: dict[str, Any], timed_out: bool = False) -> FrameworkProbe:
    details = dict(base.details)
    details.update({k: v for k, v in data.items() if k not in _TOP_LEVEL and k != "seconds"})
    return FrameworkProbe(
        name=base.name,
        installed=True,
        version=base.version or data.get("version"),
        distribution=base.distribution,
        probed=True,
        importable=bool(data.get("importable", False)),
        sees_gpu=data.get("sees_gpu"),
        device_count=data.get("device_count"),
        error=data.get("error"),
        failed_stage=data.get("failed_stage")
        or ("import" if data.get("error") and not data.get("importable") else None),
        kernel_ok=data.get("kernel_ok"),
        culprit=data.get("culprit"),
        numpy_version=data.get("numpy_version"),
        timed_out=timed_out,
        seconds=data.get("seconds"),
        details=details,
    )


def probe_frameworks(probe: bool = True, timeout_s: float = DEFAULT_PROBE_TIMEOUT_S) -> tuple[FrameworkProbe, ...]:
    """Every known framework; the installed ones probed concurrently (each in its own child) when ``probe``."""
    if not probe:
        return tuple(_base(n) for n in FRAMEWORKS)
    with ThreadPoolExecutor(max_workers=len(FRAMEWORKS)) as pool:
        return tuple(pool.map(lambda n: probe_framework(n, timeout_s), FRAMEWORKS))


def parse_nvcc_version(text: str) -> str | None:
    """ "Cuda compilation tools, release 12.4, V12.4.131" → "12.4"."""
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def _nvcc() -> tuple[str | None, str | None]:
    path = shutil.which("nvcc")
    if path is None:
        return None, None
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return path, None
    return path, parse_nvcc_version(proc.stdout)


def find_toolkits(pattern: str = "/usr/local/cuda*") -> tuple[str, ...]:
    """CUDA toolkit roots that have bin/nvcc, sorted, as found: /usr/local/cuda (usually a symlink) stays beside
    the versioned directory it points to, and the checks rely on seeing both names."""
    roots = []
    for root in sorted(glob.glob(pattern)):
        if (Path(root) / "bin" / "nvcc").exists():
            roots.append(root)
    return tuple(roots)


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def read_stack(
    driver_version: str | None,
    cuda_driver_version: str | None,
    probe: bool = True,
    timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
) -> Stack:
    """The software stack; framework probes run in parallel children unless ``probe`` is False."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        frameworks = pool.submit(probe_frameworks, probe, timeout_s)
        nvcc_path, nvcc_version = _nvcc()
        frameworks_done = frameworks.result()
    return Stack(
        os=_os_name(),
        kernel=platform.release(),
        python=platform.python_version(),
        python_executable=sys.executable,
        numpy=dist_version("numpy")[1],
        driver_version=driver_version,
        cuda_driver_version=cuda_driver_version,
        nvcc_path=nvcc_path,
        nvcc_version=nvcc_version,
        cuda_toolkits=find_toolkits(),
        cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        ld_library_path=os.environ.get("LD_LIBRARY_PATH"),
        frameworks=frameworks_done,
    )
