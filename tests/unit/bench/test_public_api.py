"""The public names are pinned (as httpx pins its ``__all__``): removing or renaming one is a visible decision."""

from __future__ import annotations

from pathlib import Path

import gpukit
import gpukit.bench
import gpukit.history


def test_bench_exports() -> None:
    expected = ["BenchRequest", "Ceilings", "Implementation", "Result", "Run", "Size", "Workload", "compare",
                "execute", "run"]  # fmt: skip
    assert gpukit.bench.__all__ == expected == sorted(expected)
    assert all(hasattr(gpukit.bench, name) for name in expected)
    assert callable(gpukit.bench.compare) and gpukit.bench.compare.__module__ == "gpukit.bench.oneshot"


def test_history_exports() -> None:
    expected = ["BUSY_TIMEOUT_S", "SCHEMA_VERSION", "History", "RunSummary", "default_db_path", "import_file",
                "open_history", "resolve_db", "resolve_path", "save_or_keep", "write_fallback"]  # fmt: skip
    assert gpukit.history.__all__ == expected  # constants, classes, functions: ruff's RUF022 order
    assert all(hasattr(gpukit.history, name) for name in expected)
    h = gpukit.history.History
    for method in ("save_run", "load_run", "list_runs", "latest_ceilings", "save_validation", "validations",
                   "save_loadtest", "loadtests", "save_acceptance", "acceptances", "latest_acceptances",
                   "previous_identity", "close", "__enter__", "__exit__"):  # fmt: skip
        assert callable(getattr(h, method)), method


def test_py_typed_ships() -> None:
    assert (Path(gpukit.__file__).parent / "py.typed").is_file()
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject and 'gpukit = "gpukit.bench.pytest_plugin"' in pyproject
