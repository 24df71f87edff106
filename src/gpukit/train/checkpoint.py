"""Checkpoints: tensors in safetensors, everything else in a JSON state, both written atomically.

A checkpoint is a pair ``NAME.safetensors`` + ``NAME.json``. Each file is written to a temporary file in the same
folder, fsync'ed, then ``os.replace``'d over the target, so a crash leaves either the old file or the new one,
never half of one. The JSON is written last and records the SHA-256 of the tensor file, so a pair is only "good"
when both parse and the hash matches; ``latest_good`` walks back past a corrupt or partial one.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.errors import TrainError

if TYPE_CHECKING:
    import torch

__all__ = ["atomic_write_bytes", "latest_good", "list_checkpoints", "load", "optimizer_tensors", "save", "temp_beside"]


def temp_beside(path: Path) -> tuple[int, str]:
    """An open temporary file next to ``path`` (same filesystem, so ``os.replace`` onto ``path`` is atomic), with the
    permissions a plain ``open(path, "w")`` would leave: the existing file's, else 0o666 less the umask. (mkstemp's
    own 0o600 would make every report and checkpoint private to its writer.) Returns (fd, name)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, mode)
    return fd, tmp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """The optimizer's per-parameter state as flat tensors ``optim.<param index>.<key>``."""
    import torch

    out: dict[str, torch.Tensor] = {}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for i, p in enumerate(params):
        for key, value in optimizer.state.get(p, {}).items():
            tensor = value if isinstance(value, torch.Tensor) else torch.tensor(value)
            out[f"optim.{i}.{key}"] = tensor.detach().to("cpu").contiguous()
    return out


def restore_optimizer(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]) -> None:
    """Copy saved state into the optimizer, in place where state already exists (CUDA graphs keep addresses)."""
    import torch

    params = [p for group in optimizer.param_groups for p in group["params"]]
    for i, p in enumerate(params):
        prefix = f"optim.{i}."
        saved = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        if not saved:
            continue
        state = optimizer.state[p]
        for key, value in saved.items():
            if key in state and hasattr(state[key], "copy_"):
                state[key].copy_(value)
            elif value.shape == p.shape:
                # empty_like keeps the parameter's memory layout (channels-last): fused Adam walks both flat
                state[key] = torch.empty_like(p, dtype=value.dtype).copy_(value)
            else:
                # fused/capturable Adam keeps `step` on the parameter's device; plain Adam on the CPU
                device = p.device if _step_on_device(optimizer) else torch.device("cpu")
                state[key] = value.to(device)


def _step_on_device(optimizer: torch.optim.Optimizer) -> bool:
    group = optimizer.param_groups[0]
    return bool(group.get("fused") or group.get("capturable"))


def save(folder: Path, name: str, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> Path:
    """Write ``folder/name.safetensors`` then ``folder/name.json`` (with the tensor file's hash) atomically."""
    from safetensors.torch import save

    blob = save({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()})
    tensor_path = folder / f"{name}.safetensors"
    atomic_write_bytes(tensor_path, blob)
    state = {**state, "tensors_file": tensor_path.name, "tensors_sha256": hashlib.sha256(blob).hexdigest()}
    json_path = folder / f"{name}.json"
    atomic_write_bytes(json_path, json.dumps(state, indent=2).encode())
    return json_path


def load(json_path: Path, verify: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint pair; raises ``TrainError`` when either file is missing, unparsable or does not match."""
    from safetensors.torch import load as st_load

    try:
        state = json.loads(Path(json_path).read_text())
        blob = (Path(json_path).parent / state["tensors_file"]).read_bytes()
    except (OSError, ValueError, KeyError) as exc:
        raise TrainError(f"checkpoint {json_path} is unreadable: {exc}") from exc
    if verify and hashlib.sha256(blob).hexdigest() != state.get("tensors_sha256"):
        raise TrainError(f"checkpoint {json_path} does not match its tensor file (corrupt or partial)")
    try:
        return st_load(blob), state
    except Exception as exc:  # safetensors raises its own error type for a bad header
        raise TrainError(f"checkpoint {json_path} tensor file is corrupt: {exc}") from exc


def list_checkpoints(folder: Path) -> list[Path]:
    """Resume checkpoints in ``folder``, newest first (their names sort by epoch, then step)."""
    return sorted(Path(folder).glob("ckpt-*.json"), reverse=True)


def latest_good(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[str]] | None:
    """The newest checkpoint that loads and verifies, plus the ones skipped on the way as 'path: reason'."""
    skipped: list[str] = []
    for path in list_checkpoints(folder):
        try:
            tensors, state = load(path)
        except TrainError as exc:
            skipped.append(exc.message)
            continue
        return tensors, state, skipped
    return None
