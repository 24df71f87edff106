"""Run in a child interpreter (``python -c <this source> FRAMEWORK``): import one framework, ask it for GPUs.

A child so that a broken import cannot kill the caller, a hang can be timed out, and a framework that initialises
CUDA does not do so in the caller. It imports nothing from gpukit. The last line it prints is ``GPUKIT_PROBE {json}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any


def _torch(out: dict[str, Any]) -> None:
    import torch

    out["version"] = torch.__version__
    hip = getattr(torch.version, "hip", None)
    out["build"] = "cuda" if torch.version.cuda else ("rocm" if hip else "cpu")
    out["cuda_runtime"] = torch.version.cuda
    out["hip_runtime"] = hip
    try:
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:
        out["cudnn"] = None
    try:
        v = torch.cuda.nccl.version() if torch.version.cuda else None
        out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
    except Exception:
        out["nccl"] = None
    out["stage"] = "gpu_query"
    out["sees_gpu"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count() if out["sees_gpu"] else 0
    devices = []
    for i in range(out["device_count"]):
        p = torch.cuda.get_device_properties(i)
        devices.append(
            {
                "index": i,
                "name": p.name,
                "compute_capability": f"{p.major}.{p.minor}",
                "sm_count": p.multi_processor_count,
                "memory_total_bytes": p.total_memory,
                "uuid": str(getattr(p, "uuid", "")) or None,
            }
        )
    out["devices"] = devices
    if devices:
        out["stage"] = "kernel"  # one small matmul: proves kernels for this GPU's architecture are in the build
        x = torch.ones(64, 64, device="cuda")
        if float((x @ x).sum().item()) != 64.0**3:
            raise RuntimeError("a 64x64 matmul of ones gave the wrong sum")
        out["kernel_ok"] = True


def _numba(out: dict[str, Any]) -> None:
    import importlib

    import numba
    from numba import cuda

    out["version"] = numba.__version__
    try:
        import numba_cuda

        out["numba_cuda"] = getattr(numba_cuda, "__version__", None)
    except ImportError:
        out["numba_cuda"] = None
    # `from numba import cuda` is lazy: the kernel lowering (and with it numba-cuda's numpy use, e.g. np.row_stack)
    # loads at the first @cuda.jit compile. Load it now, so a broken pairing shows here and not in the user's code.
    out["stage"] = "kernel"
    importlib.import_module(cuda.__name__ + ".cudaimpl")
    out["stage"] = "gpu_query"
    out["sees_gpu"] = bool(cuda.is_available())
    out["device_count"] = len(cuda.gpus) if out["sees_gpu"] else 0
    if out["sees_gpu"]:
        out["cuda_runtime"] = ".".join(map(str, cuda.runtime.get_version()))
        out["stage"] = "kernel"
        import numpy as np

        @cuda.jit
        def _add_one(a):  # type: ignore[no-untyped-def]
            i = cuda.threadIdx.x  # one block of 32 threads
            if i < a.size:
                a[i] += 1

        a = cuda.to_device(np.zeros(32, dtype=np.float32))
        _add_one[1, 32](a)
        if float(a.copy_to_host().sum()) != 32.0:
            raise RuntimeError("a 32-thread test kernel did not add 1 to every element")
        out["kernel_ok"] = True


def _cupy(out: dict[str, Any]) -> None:
    import cupy

    out["version"] = cupy.__version__
    rt = cupy.cuda.runtime
    out["cuda_runtime"] = _cuda_str(rt.runtimeGetVersion())
    out["stage"] = "gpu_query"
    out["cuda_driver"] = _cuda_str(rt.driverGetVersion())
    out["device_count"] = rt.getDeviceCount()
    out["sees_gpu"] = out["device_count"] > 0
    if out["sees_gpu"]:
        out["stage"] = "kernel"  # an elementwise kernel compiled by NVRTC: catches NVRTC / driver mismatches
        if int(cupy.arange(32, dtype=cupy.float32).sum().item()) != 496:
            raise RuntimeError("cupy.arange(32).sum() != 496")
        out["kernel_ok"] = True


def _cuda_str(v: int) -> str | None:
    return f"{v // 1000}.{(v % 1000) // 10}" if v else None


def _triton(out: dict[str, Any]) -> None:
    import triton

    out["version"] = triton.__version__
    out["stage"] = "gpu_query"
    target = triton.runtime.driver.active.get_current_target()
    out["target"] = f"{target.backend}:{target.arch}"
    out["sees_gpu"] = target.backend in ("cuda", "hip")


def _jax(out: dict[str, Any]) -> None:
    import jax

    out["version"] = jax.__version__
    out["stage"] = "gpu_query"
    gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda", "rocm")]
    out["sees_gpu"] = bool(gpus)
    out["device_count"] = len(gpus)


def _tensorflow(out: dict[str, Any]) -> None:
    import tensorflow as tf

    out["version"] = tf.__version__
    out["stage"] = "gpu_query"
    gpus = tf.config.list_physical_devices("GPU")
    out["sees_gpu"] = bool(gpus)
    out["device_count"] = len(gpus)
    build = tf.sysconfig.get_build_info()
    out["cuda_runtime"] = build.get("cuda_version")
    out["cudnn"] = build.get("cudnn_version")


def _paddle(out: dict[str, Any]) -> None:
    import paddle

    out["version"] = paddle.__version__
    out["stage"] = "gpu_query"
    n = paddle.device.cuda.device_count() if paddle.device.is_compiled_with_cuda() else 0
    out["sees_gpu"] = n > 0
    out["device_count"] = n


def _mxnet(out: dict[str, Any]) -> None:
    import mxnet

    out["version"] = mxnet.__version__
    out["stage"] = "gpu_query"
    n = mxnet.context.num_gpus()
    out["sees_gpu"] = n > 0
    out["device_count"] = n


PROBES = {
    "torch": _torch,
    "numba": _numba,
    "cupy": _cupy,
    "triton": _triton,
    "jax": _jax,
    "tensorflow": _tensorflow,
    "paddle": _paddle,
    "mxnet": _mxnet,
}


def _owner(filename: str) -> tuple[str | None, str | None, str | None]:
    """(top-level module, distribution, version) that ``filename`` belongs to, by the sys.path entry it is under."""
    best = ""
    for entry in sys.path:
        entry = os.path.abspath(entry or ".")
        if filename.startswith(entry + os.sep) and len(entry) > len(best):
            best = entry
    if not best:
        return None, None, None
    top = filename[len(best) + 1 :].split(os.sep)[0]
    top = top[:-3] if top.endswith(".py") else top
    try:
        from importlib import metadata

        dists = metadata.packages_distributions().get(top) or []
        if dists:
            return top, dists[0], metadata.version(dists[0])
    except Exception:
        pass
    return top, None, None


def _culprit(exc: BaseException) -> dict[str, Any] | None:
    """The innermost frame outside numpy and the standard library: the code that actually failed."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/numpy/" in path or "<frozen" in path or path.startswith("<"):
            continue
        module, dist, version = _owner(frame.filename)
        return {
            "file": frame.filename,
            "line": frame.lineno,
            "code": (frame.line or "").strip(),
            "module": module,
            "distribution": dist,
            "distribution_version": version,
        }
    return None


def main(name: str) -> None:
    # stage: how far the probe got — "import", then "gpu_query" (asking for devices), then "kernel" (running one)
    out: dict[str, Any] = {"name": name, "importable": False, "sees_gpu": None, "stage": "import"}
    start = time.perf_counter()
    try:
        PROBES[name](out)
        out["importable"] = True
        out["failed_stage"] = None
    except BaseException as exc:  # a probe must always answer
        out["error"] = f"{type(exc).__name__}: {exc}".strip()[:800]
        out["culprit"] = _culprit(exc)
        out["failed_stage"] = out["stage"]
        out["importable"] = out["stage"] != "import"
        if out["stage"] == "gpu_query":
            out["sees_gpu"] = False
    out.pop("stage")
    try:
        import numpy

        out["numpy_version"] = numpy.__version__
    except BaseException:
        out["numpy_version"] = None
    out["seconds"] = round(time.perf_counter() - start, 3)
    out["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    sys.stdout.write("\nGPUKIT_PROBE " + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
