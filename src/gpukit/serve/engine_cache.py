"""The engine decision, cached beside the checkpoint: ``.gpukit-engine/decisions.json`` (and inductor's own kernel
cache in ``.gpukit-engine/inductor``, see ``gpukit.serve.engines``).

An entry is keyed by everything that can change the engine's speed or numbers: the checkpoint's own hash, the
device's name (GPU name, or CPU model and the forward pass's thread count), the NVIDIA driver, the torch and gpukit
versions, the engine asked for, the precision, the padded batch sizes, the gate's images and tolerances. A changed
key is a miss: the engines are built, gated and timed again, and the new entry is written beside the old ones (the
newest ``KEEP`` are kept). A folder that cannot be written (a read-only volume) leaves the server without a cache,
never without a model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["KEEP", "cache_folder", "cache_key", "key_digest", "read_decision", "write_decision"]

KEEP = 16  # entries kept per checkpoint (each a few hundred bytes)
_FILE = "decisions.json"


def cache_folder(checkpoint: Path) -> Path:
    """``.gpukit-engine`` beside the checkpoint's ``.json``."""
    return Path(checkpoint).parent / ".gpukit-engine"


def device_identity(device: str) -> dict[str, Any]:
    """The device's name and driver: a GPU's name from torch and the driver from NVML; a CPU's model and the
    threads its forward pass uses."""
    import torch

    from gpukit.hardware.cpu import read_cpu
    from gpukit.hardware.gpu import read_driver
    from gpukit.serve.model import cpu_threads

    if device.startswith("cuda"):
        return {"device": torch.cuda.get_device_name(torch.device(device)), "driver": read_driver()[0]}
    return {"device": read_cpu().model or "cpu", "driver": None, "threads": cpu_threads()}


def cache_key(checkpoint: Path, device: str, **fields: Any) -> dict[str, Any]:
    """The key of one decision: checkpoint hash, device identity, versions, and the caller's ``fields`` (engine,
    precision, batch sizes, gate)."""
    import torch

    from gpukit import __version__

    state = json.loads(Path(checkpoint).read_text())
    return {
        "checkpoint": state.get("meta_sha256") or state.get("tensors_sha256"),
        **device_identity(device),
        "torch": torch.__version__,
        "gpukit": __version__,
        **fields,
    }


def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _entries(checkpoint: Path) -> dict[str, Any]:
    try:
        data = json.loads((cache_folder(checkpoint) / _FILE).read_text())
    except (OSError, ValueError):  # none yet, or a damaged file: a miss, rewritten by the next decision
        return {}
    return data if isinstance(data, dict) else {}


def read_decision(checkpoint: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The decision stored under exactly this key, or None."""
    entry = _entries(checkpoint).get(key_digest(key))
    if not isinstance(entry, dict) or entry.get("key") != json.loads(json.dumps(key, default=str)):
        return None
    decision = entry.get("decision")
    return decision if isinstance(decision, dict) else None


def write_decision(checkpoint: Path, key: dict[str, Any], decision: dict[str, Any]) -> str | None:
    """Store ``decision`` under ``key``; returns why it could not be written, or None."""
    from gpukit.train.checkpoint import atomic_write_bytes

    entries = _entries(checkpoint)
    entries.pop(key_digest(key), None)
    entries[key_digest(key)] = {"key": key, "decision": decision}
    kept = dict(list(entries.items())[-KEEP:])  # insertion order: the newest last
    try:
        cache_folder(checkpoint).mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(cache_folder(checkpoint) / _FILE, json.dumps(kept, indent=1, default=str).encode())
    except OSError as exc:
        return f"the engine decision was not cached ({cache_folder(checkpoint)}: {exc.strerror or exc})"
    return None
