"""Checkpoints: tensors in safetensors, everything else in a JSON state, both written atomically.

A checkpoint is a pair ``NAME.safetensors`` + ``NAME.json``. Each file is written to a temporary file in the same
folder, fsync'ed, then ``os.replace``'d over the target, so a crash leaves either the old file or the new one,
never half of one. The JSON is written last and records the SHA-256 of the tensor file and ``meta_sha256``, the
SHA-256 of the JSON's own content (canonical form, every key but that one), so a pair is only "good" when both
parse and both hashes match: a corrupt, partial *or edited* checkpoint is recognised as such, and
``latest_good`` walks back past it. Every problem with a checkpoint is a ``ConfigError`` (bad input, exit 2).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpukit.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from gpukit.train.adam import Adam

__all__ = [
    "atomic_write_bytes",
    "latest_good",
    "link_or_copy",
    "list_checkpoints",
    "load",
    "meta_hash",
    "optimizer_tensors",
    "save",
    "temp_beside",
]

_HINT = "the checkpoint must be as `gpukit train` wrote it; retrain, or give another run folder or checkpoint"


def _read_umask() -> int:
    umask = os.umask(0)  # the only way to read it sets it: done once, at import, not from a writer thread
    os.umask(umask)
    return umask


_UMASK = _read_umask()


def temp_beside(path: Path) -> tuple[int, str]:
    """An open temporary file next to ``path`` (same filesystem, so ``os.replace`` onto ``path`` is atomic), with the
    permissions a plain ``open(path, "w")`` would leave: the existing file's, else 0o666 less the umask. (mkstemp's
    own 0o600 would make every report and checkpoint private to its writer.) Returns (fd, name)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_UMASK
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


def optimizer_tensors(optimizer: Adam) -> dict[str, torch.Tensor]:
    """The optimizer's per-parameter state as flat tensors ``optim.<param index>.<key>``."""
    import torch

    out: dict[str, torch.Tensor] = {}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for i, p in enumerate(params):
        for key, value in optimizer.state.get(p, {}).items():
            tensor = value if isinstance(value, torch.Tensor) else torch.tensor(value)
            out[f"optim.{i}.{key}"] = tensor.detach().to("cpu", copy=True).contiguous()  # a snapshot, also on CPU
    return out


def restore_optimizer(optimizer: Adam, tensors: dict[str, torch.Tensor]) -> None:
    """Copy saved state into the optimizer, in place where state already exists (CUDA graphs keep addresses)."""
    import torch

    params = [p for group in optimizer.param_groups for p in group["params"]]
    for i, p in enumerate(params):
        prefix = f"optim.{i}."
        saved = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        if not saved:
            continue
        state = optimizer.state.setdefault(p, {})
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


def _step_on_device(optimizer: Adam) -> bool:
    group = optimizer.param_groups[0]
    return bool(group.get("fused") or group.get("capturable"))


def save(folder: Path, name: str, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> Path:
    """Write ``folder/name.safetensors`` then ``folder/name.json`` (with the tensor file's hash) atomically."""
    from safetensors.torch import save

    blob = save({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()})
    tensor_path = folder / f"{name}.safetensors"
    atomic_write_bytes(tensor_path, blob)
    state = {**state, "tensors_file": tensor_path.name, "tensors_sha256": hashlib.sha256(blob).hexdigest()}
    state["meta_sha256"] = meta_hash(state)
    json_path = folder / f"{name}.json"
    atomic_write_bytes(json_path, json.dumps(state, indent=2).encode())
    return json_path


def meta_hash(state: dict[str, Any]) -> str:
    """SHA-256 of a checkpoint's JSON content in canonical form (sorted keys, compact), ``meta_sha256`` left out."""
    body = {k: v for k, v in state.items() if k != "meta_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def link_or_copy(src_json: Path, dst_json: Path) -> None:
    """Make ``dst`` (json + safetensors) the same checkpoint as ``src`` without writing it again: a hard link
    replaced atomically onto the target (``src`` is later replaced by a new file, so the link keeps this one);
    a copy where the filesystem has no hard links. The tensor file goes first, the JSON last, as in ``save``."""
    import shutil

    for src, dst in (
        (src_json.with_suffix(".safetensors"), dst_json.with_suffix(".safetensors")),
        (src_json, dst_json),
    ):
        tmp = dst.with_name(f".{dst.name}.link.tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    if src_json.name != dst_json.name:  # the JSON names its tensor file: a linked one names the source's
        state = json.loads(dst_json.read_text())
        state["tensors_file"] = dst_json.with_suffix(".safetensors").name
        state["meta_sha256"] = meta_hash(state)
        atomic_write_bytes(dst_json, json.dumps(state, indent=2).encode())


def load(json_path: Path, verify: bool = True) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint pair; raises ``ConfigError`` when either file is missing, unparsable, edited or does not
    match the other."""
    from safetensors.torch import load as st_load

    try:
        state = json.loads(Path(json_path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"checkpoint {json_path} is unreadable: {exc}", hint=_HINT) from exc
    if not isinstance(state, dict):
        raise ConfigError(f"checkpoint {json_path} holds a JSON {type(state).__name__}, not an object", hint=_HINT)
    if verify and state.get("meta_sha256") != meta_hash(state):
        raise ConfigError(f"checkpoint {json_path} was edited: its content does not match its meta_sha256", hint=_HINT)
    name = state.get("tensors_file")
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ConfigError(
            f"checkpoint {json_path}: tensors_file must be a file name beside it, not {name!r}", hint=_HINT
        )
    try:
        blob = (Path(json_path).parent / name).read_bytes()
    except OSError as exc:
        raise ConfigError(f"checkpoint {json_path}: its tensor file is unreadable: {exc}", hint=_HINT) from exc
    if verify and hashlib.sha256(blob).hexdigest() != state.get("tensors_sha256"):
        raise ConfigError(f"checkpoint {json_path} does not match its tensor file (corrupt or partial)", hint=_HINT)
    try:
        return st_load(blob), state
    except Exception as exc:  # safetensors raises its own error type for a bad header
        raise ConfigError(f"checkpoint {json_path} tensor file is corrupt: {exc}", hint=_HINT) from exc


def list_checkpoints(folder: Path) -> list[Path]:
    """Resume checkpoints in ``folder``, newest first (their names sort by epoch, then step)."""
    return sorted(Path(folder).glob("ckpt-*.json"), reverse=True)


def latest_good(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[str]] | None:
    """The newest checkpoint that loads and verifies, plus the ones skipped on the way as 'path: reason'."""
    skipped: list[str] = []
    for path in list_checkpoints(folder):
        try:
            tensors, state = load(path)
        except ConfigError as exc:
            skipped.append(exc.message)
            continue
        return tensors, state, skipped
    return None
