"""Every package has a face (issue 26, item 9), pinned the way httpx pins its own (``tests/test_exported_members.py``):
each package of gpukit — found by walking the source tree, so a new one is covered the day it is added — declares
``__all__``; every name in it resolves (as an attribute, or as a submodule); every public name of its own in its
namespace (defined in its ``__init__`` or its modules, or data — not what it imported from elsewhere for its own
use) is in it; and it is sorted the way ruff's RUF022 sorts (constants, classes, then the rest)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import types
from typing import Any

import pytest

import gpukit


def _packages() -> list[str]:
    names = ["gpukit"]
    for info in pkgutil.walk_packages(gpukit.__path__, prefix="gpukit."):
        if info.ispkg:
            names.append(info.name)
    return sorted(names)


PACKAGES = _packages()


def _defined(package: types.ModuleType) -> set[str]:
    """The public names the package defines: those in its namespace that are its own — defined in its ``__init__``
    or one of its modules, or data — less its submodules and what it imported from elsewhere for its own use
    (``gpukit.errors``' exceptions, ``functools.cache``, typing helpers)."""
    out = set()
    for name, value in vars(package).items():
        if name.startswith("_") or name == "TYPE_CHECKING":
            continue
        if isinstance(value, types.ModuleType) or type(value).__name__ == "_Feature":  # submodules; __future__'s
            continue
        module = getattr(value, "__module__", None)
        if module is not None and module != package.__name__ and not module.startswith(package.__name__ + "."):
            continue
        out.add(name)
    return out


def _ruf022_key(name: str) -> tuple[int, str]:
    """ruff RUF022's isort-style order: SCREAMING_CASE, then CamelCase, then everything else."""
    if name.isupper() and len(name) > 1:
        return 0, name
    if name[:1].isupper():
        return 1, name
    return 2, name


def test_every_package_is_found() -> None:
    assert {"gpukit", "gpukit.bench", "gpukit.plan", "gpukit.serve", "gpukit.train", "gpukit.history"} <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_what_the_package_defines(name: str) -> None:
    package = importlib.import_module(name)
    exported: Any = getattr(package, "__all__", None)
    assert isinstance(exported, list) and exported, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ names a member twice"
    assert exported == sorted(exported, key=_ruf022_key), f"{name}.__all__ is not in RUF022 order"
    # a member resolves as an attribute, or as a submodule (a package whose face is its modules: `from pkg import x`)
    missing = [m for m in exported if not hasattr(package, m) and importlib.util.find_spec(f"{name}.{m}") is None]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    unlisted = sorted(_defined(package) - set(exported))
    assert not unlisted, f"{name} defines public names missing from __all__: {unlisted}"


def test_the_issue_s_examples() -> None:
    from gpukit.plan import plan

    result = plan("llama-2-7b")
    assert result.params == 6_738_415_616 and result.fits
    import gpukit.serve

    assert {"ServeConfig", "create_app", "DeploySpec", "write_deploy"} <= set(gpukit.serve.__all__)
