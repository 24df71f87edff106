"""Who this node is, for the shared store: its name, hostname, GPUs (UUID, serial, PCI bus), driver, CUDA and the
software stack — cheap (NVML and package metadata only: no framework import, no CUDA initialisation).

The name is ``--node NAME`` when given, else ``$GPUKIT_NODE`` (a Kubernetes pod sets it to ``spec.nodeName``:
containers have random hostnames), else the hostname. Every run saved to the history carries this under ``"node"``.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from gpukit.errors import ConfigError
from gpukit.hardware import _nvml
from gpukit.hardware.gpu import read_driver
from gpukit.hardware.stack import dist_version, torch_build_static

__all__ = ["NODE_ENV", "gpu_ids", "identity_changes", "node_identity", "node_name", "stack_key"]

NODE_ENV = "GPUKIT_NODE"
_MAX_NAME = 200


def node_name(name: str | None = None) -> str:
    """``name``, else ``$GPUKIT_NODE``, else the hostname; an empty or over-long name is bad input (ConfigError)."""
    chosen = name if name is not None else (os.environ.get(NODE_ENV) or socket.gethostname())
    chosen = chosen.strip()
    if not chosen or len(chosen) > _MAX_NAME or any(not c.isprintable() for c in chosen):
        raise ConfigError(
            f"bad node name {chosen[:40]!r}", hint=f"give --node NAME (1–{_MAX_NAME} printable characters)"
        )
    return chosen


def _gpus() -> list[dict[str, Any]]:
    nv = _nvml.module()
    if nv is None:
        return []
    out = []
    for i in range(_nvml.call(nv.nvmlDeviceGetCount) or 0):
        h = _nvml.handle(i)
        if h is None:
            continue
        pci = _nvml.call(nv.nvmlDeviceGetPciInfo, h)
        out.append(
            {
                "index": i,
                "uuid": _nvml.text(_nvml.call(nv.nvmlDeviceGetUUID, h)),
                "serial": _nvml.text(_nvml.call(getattr(nv, "nvmlDeviceGetSerial", None), h)),
                "name": _nvml.text(_nvml.call(nv.nvmlDeviceGetName, h)) or f"GPU {i}",
                "pci_bus_id": _nvml.text(pci.busId) if pci is not None else None,
            }
        )
    return out


def _stack() -> dict[str, Any]:
    stack: dict[str, Any] = {"gpukit": dist_version("gpukit")[1], "python": platform.python_version()}
    for name in ("torch", "numpy", "numba-cuda", "cupy-cuda12x", "nvidia-ml-py"):
        version = dist_version(name)[1]
        if version is not None:
            stack[name] = version
    if "torch" in stack:
        stack["torch_cuda"] = torch_build_static().get("cuda_runtime")
    return stack


def stack_key(driver: str | None, cuda: str | None, stack: dict[str, Any]) -> str:
    """A short stable string naming the software the figures depend on: the fleet compares like with like.
    ``"drv580.159.04 cuda13.0 torch2.11.0 gpukit0.1"``; an unknown part reads ``-``."""
    gpukit = str(stack.get("gpukit") or "-")
    major_minor = ".".join(gpukit.split(".")[:2])
    return f"drv{driver or '-'} cuda{cuda or '-'} torch{stack.get('torch') or '-'} gpukit{major_minor}"


def gpu_ids(identity: dict[str, Any]) -> list[str]:
    """The GPUs of an identity as comparable ids (UUID, else serial, else bus id), in index order."""
    gpus = identity.get("gpus") or []
    return [str(g.get("uuid") or g.get("serial") or g.get("pci_bus_id") or g.get("index")) for g in gpus]


def _gpu_label(gpu: dict[str, Any]) -> str:
    serial = f" (serial {gpu['serial']})" if gpu.get("serial") else ""
    return f"{gpu.get('uuid') or gpu.get('pci_bus_id') or '?'}{serial}"


def identity_changes(previous: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """What changed on a node between two identities, one sentence each (``[]`` when nothing did, or when there is
    no previous one): GPUs gone, new or moved to another index, and the driver, CUDA and stack."""
    if not previous:
        return []
    old = {gid: g for gid, g in zip(gpu_ids(previous), previous.get("gpus") or [], strict=True)}
    new = {gid: g for gid, g in zip(gpu_ids(current), current.get("gpus") or [], strict=True)}
    out = [f"GPU {g.get('index')} {_gpu_label(g)} is gone" for gid, g in old.items() if gid not in new]
    out += [f"GPU {g.get('index')} {_gpu_label(g)} is new" for gid, g in new.items() if gid not in old]
    out += [
        f"GPU {_gpu_label(g)} moved from index {old[gid].get('index')} to {g.get('index')}"
        for gid, g in new.items()
        if gid in old and old[gid].get("index") != g.get("index")
    ]
    for key, what in (("driver", "driver"), ("cuda", "CUDA"), ("stack_key", "software stack")):
        if previous.get(key) != current.get(key):
            out.append(f"{what} {previous.get(key) or 'unknown'} → {current.get(key) or 'unknown'}")
    return out


def node_identity(name: str | None = None) -> dict[str, Any]:
    """This node's identity (see the module doc). Without NVML, ``gpus`` is ``[]`` and driver/CUDA are None."""
    driver, cuda = read_driver()
    stack = _stack()
    return {
        "name": node_name(name),
        "hostname": socket.gethostname(),
        "driver": driver,
        "cuda": cuda,
        "gpus": _gpus(),
        "stack": stack,
        "stack_key": stack_key(driver, cuda, stack),
    }
