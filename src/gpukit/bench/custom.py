"""Loading a user's own workload from ``FILE.py:NAME`` (`gpukit bench --workload FILE.py:NAME`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gpukit.bench.workloads.base import Workload
from gpukit.errors import ConfigError

__all__ = ["load_workload"]


def load_workload(spec: str) -> Workload:
    """Import ``FILE.py`` and return its attribute ``NAME`` (a :class:`Workload`, or a function returning one)."""
    file, sep, name = spec.rpartition(":")
    if not sep or not file or not name:
        raise ConfigError(f"bad --workload '{spec}'", hint="use FILE.py:NAME, e.g. examples/my_workload.py:WORKLOAD")
    path = Path(file).expanduser()
    if path.is_dir():
        raise ConfigError(
            f"--workload {spec}: {path} is a directory, not a Python file",
            hint=f"name the file: --workload {path / 'my_workload.py'}:{name}",
        )
    if not path.is_file():
        raise ConfigError(f"no such file: {path}", hint="give the path of a Python file defining a Workload")
    mod_name = f"gpukit_user_workload_{abs(hash(path.resolve()))}"
    module_spec = importlib.util.spec_from_file_location(mod_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look the module up by name
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    obj = getattr(module, name, None)
    if callable(obj) and not isinstance(obj, Workload):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError(f"calling {spec} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, Workload):
        raise ConfigError(
            f"{spec} is not a gpukit Workload",
            hint="define NAME = gpukit.bench.Workload(...); see docs/custom-workload.md",
        )
    return obj
