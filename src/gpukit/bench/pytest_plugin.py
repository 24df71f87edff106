"""A pytest plugin: the ``gpukit_bench`` fixture measures a function inside a test with gpukit's engine — the
correctness gate (before and after timing), device-side timing, compile and transfers apart, the spread — and can
fail the test against a stored baseline.

    def test_add_is_fast(gpukit_bench):
        row = gpukit_bench(lambda a, b: a + b, backend="torch-cuda",
                           inputs=lambda rng: {"a": rng.random(1 << 24, dtype=np.float32),
                                               "b": rng.random(1 << 24, dtype=np.float32)},
                           reference=lambda a, b: a + b)
        assert row.gbps > 1000

A row that fails its check fails the test (with gpukit's reason); a backend that is not available here skips it.
Baselines: ``pytest --gpukit-bench-save`` writes each measured row's samples (their median, quartiles and the
median's interval) and the hardware state to the baseline file (default ``.gpukit-bench.json`` in the rootdir,
``--gpukit-bench-baseline PATH``); each save in the same hardware state also keeps the row's earlier medians (up to
20), and from three on they give the row its run-to-run band. Later runs classify each row against it with the same
comparison as `gpukit history compare` (SAME / FASTER / SLOWER / UNSURE, :mod:`gpukit.bench.verdict`) and fail a
test whose row comes out SLOWER (by more than ``--gpukit-bench-tolerance`` per cent, default 0). A baseline taken in
another hardware state (GPU, driver, clocks, versions) fails the test with the differences, unless
``--gpukit-bench-force`` (then rows are only compared). Registered through the ``pytest11`` entry point ``gpukit``
(installed with gpukit), or with ``-p gpukit.bench.pytest_plugin``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a test uses the fixture: loading the plugin stays cheap for every other pytest run
    from gpukit.bench.results import Result

__all__ = ["GpukitBench", "gpukit_bench"]

BASELINE_FILE = ".gpukit-bench.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpukit", "gpukit_bench: measured, checked benchmarks inside tests")
    group.addoption("--gpukit-bench-save", action="store_true", help="record measured rows as the baseline")
    group.addoption("--gpukit-bench-baseline", default=None, help=f"baseline file (default: rootdir/{BASELINE_FILE})")
    group.addoption("--gpukit-bench-tolerance", type=float, default=0.0, help="SLOWER allowed up to this %% (0)")
    group.addoption("--gpukit-bench-force", action="store_true", help="compare with a baseline of another state")


class _Store:
    """The baseline file: test id and row name → throughput, unit and spread."""

    def __init__(self, config: pytest.Config) -> None:
        given = config.getoption("--gpukit-bench-baseline", default=None)
        self.path = Path(given) if given else Path(str(config.rootpath)) / BASELINE_FILE
        self.save = bool(config.getoption("--gpukit-bench-save", default=False))
        self.tolerance_pct = float(config.getoption("--gpukit-bench-tolerance", default=0.0))
        self.force = bool(config.getoption("--gpukit-bench-force", default=False))
        self.rows: dict[str, dict[str, Any]] = {}
        self.state: dict[str, Any] | None = None  # the baseline file's hardware state
        self._here: dict[str, Any] | None = None
        self.measured: list[tuple[str, Result]] = []
        self.verdicts: dict[str, str] = {}  # row key → SAME / FASTER / SLOWER / UNSURE against the baseline
        if self.path.is_file():
            try:
                doc = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise pytest.UsageError(f"gpukit_bench: cannot read the baseline {self.path}: {exc}") from exc
            self.rows = dict(doc.get("rows", {})) if isinstance(doc, dict) else {}
            self.state = doc.get("state") if isinstance(doc, dict) else None

    def here(self) -> dict[str, Any]:
        """This process's hardware state (read once, when the first row is judged or saved)."""
        if self._here is None:
            from gpukit.bench.runner import hardware_state

            self._here = hardware_state()
        return self._here

    def earlier_medians(self, key: str, unit: str | None) -> list[float]:
        """The medians earlier saves recorded for this row, when they were taken in this hardware state: each
        ``--gpukit-bench-save`` adds one, and three or more give the row its run-to-run band."""
        from gpukit.bench.verdict import state_differences

        base = self.rows.get(key) or {}
        if base.get("unit") != unit or self.state is None or state_differences(self.state, self.here()):
            return []
        return [float(m) for m in base.get("medians") or [] if isinstance(m, int | float)]

    def write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        doc = {"format": "gpukit-bench-pytest", "state": self.here(), "rows": self.rows}
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True, default=str))
        os.replace(tmp, self.path)


def _unit(r: Result) -> str:
    from gpukit.bench.results import THROUGHPUT_UNITS

    return THROUGHPUT_UNITS.get(r.throughput_unit or "", (1.0, ""))[1]


class GpukitBench:
    """What the ``gpukit_bench`` fixture gives a test: call it with one function, or ``.compare`` several."""

    def __init__(self, nodeid: str, store: _Store) -> None:
        self.nodeid = nodeid
        self._store = store
        self.rows: list[Result] = []

    def __call__(
        self,
        fn: Callable[..., Any],
        *,
        backend: str = "numpy",
        inputs: Any,
        reference: Any,
        **kwargs: Any,
    ) -> Result:
        """Measure ``fn`` on ``backend`` (arguments as :func:`gpukit.bench.compare`); returns the checked row."""
        return self.compare({backend: fn}, inputs=inputs, reference=reference, **kwargs)[0]

    def compare(self, implementations: Mapping[str, Any], **kwargs: Any) -> list[Result]:
        """Measure several implementations in one run (speedups against the best CPU row); every row is judged."""
        from gpukit.bench.oneshot import compare

        kwargs.setdefault("name", "gpukit_bench")
        rows = compare(implementations, **kwargs)
        for r in rows:
            self._judge(r)
        self.rows += rows
        return rows

    def _judge(self, r: Result) -> None:
        if r.status == "failed":
            pytest.fail(f"gpukit_bench: {r.backend} failed: {r.reason}", pytrace=False)
        if r.status == "skipped":
            pytest.skip(f"gpukit_bench: {r.backend} not run here: {r.reason}")
        key = f"{self.nodeid}::{r.backend}"
        self._store.measured.append((key, r))
        if self._store.save:
            from gpukit.bench.verdict import RUN_TO_RUN_RUNS, Spread

            stats = Spread.from_samples(r.samples_s).to_dict() if r.samples_s else None
            medians = [*self._store.earlier_medians(key, r.throughput_unit), stats["median_s"]] if stats else []
            row = {"unit": r.throughput_unit, "value": r.throughput, "stats": stats}
            self._store.rows[key] = {**row, "medians": medians[-RUN_TO_RUN_RUNS:]}
            return
        base = self._store.rows.get(key)
        if not base or base.get("unit") != r.throughput_unit or not isinstance(base.get("stats"), dict):
            return
        self._compare(r, base)

    def _compare(self, r: Result, base: dict[str, Any]) -> None:
        """The row against its baseline, with the comparison every gpukit command uses (bench/verdict.py)."""
        from gpukit.bench.baselines import StateDiffers, refuse_or_mark, settled_same
        from gpukit.bench.verdict import RunToRun, Spread, classify

        if self._store.state is not None:
            try:
                refuse_or_mark(self._store.state, self._store.here(), self._store.force, "this run and its baseline")
            except StateDiffers as exc:
                pytest.fail(f"gpukit_bench: {exc.message} (--gpukit-bench-force compares anyway)", pytrace=False)
        band = RunToRun.from_medians([m for m in base.get("medians") or [] if isinstance(m, int | float)])
        v = classify(Spread.from_dict(base["stats"]), Spread.from_samples(r.samples_s), band)
        v = settled_same(v, r, run_to_run=band)
        self._store.verdicts[f"{self.nodeid}::{r.backend}"] = v.verdict
        if v.verdict == "SLOWER" and v.change > self._store.tolerance_pct / 100:
            unit = _unit(r)
            pytest.fail(
                f"gpukit_bench: {r.backend} is SLOWER than its baseline: {v.why} "
                f"({r.throughput or 0:,.4g} {unit} against {float(base.get('value') or 0):,.4g} {unit})",
                pytrace=False,
            )


_STORE_KEY = pytest.StashKey[_Store]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STORE_KEY] = _Store(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    store = config.stash.get(_STORE_KEY, None)
    if store is not None and store.save and store.rows:
        store.write()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    store = config.stash.get(_STORE_KEY, None)
    if store is None or not store.measured:
        return
    terminalreporter.section("gpukit_bench")
    for key, r in store.measured:
        unit = _unit(r)
        terminalreporter.write_line(
            f"{key}: {r.kernel_median_s or 0:.3g} s median ({r.kernel_min_s or 0:.3g}–{r.kernel_max_s or 0:.3g}), "
            f"{r.throughput or 0:,.4g} {unit}, checked (error {r.error:.2g})"
            + (f", {store.verdicts[key]} against the baseline" if key in store.verdicts else "")
        )
    if store.save:
        terminalreporter.write_line(f"baseline written to {store.path}")


@pytest.fixture
def gpukit_bench(request: pytest.FixtureRequest) -> GpukitBench:
    """Measure a function with gpukit's engine inside a test (see the module docstring)."""
    store = request.config.stash.get(_STORE_KEY, None)
    if store is None:  # registered late (after pytest_configure ran): make the store now
        store = _Store(request.config)
        request.config.stash[_STORE_KEY] = store
    return GpukitBench(request.node.nodeid, store)
