"""Names a package exports but imports only when first used (PEP 562): its ``__getattr__``.

    __getattr__ = lazy_exports(__name__, {"Run": "gpukit.bench.results", "serve": ("gpukit.serve.server", "run")})

A name maps to the module that defines it (same name there) or to ``(module, name there)``. The value is kept in the
package once imported, so the module-level ``__getattr__`` runs once per name.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str | tuple[str, str]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` that imports ``names`` on first use."""

    def __getattr__(name: str) -> Any:
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = where if isinstance(where, tuple) else (where, name)
        value = getattr(importlib.import_module(module), attr)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
