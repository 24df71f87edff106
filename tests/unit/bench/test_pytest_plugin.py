"""The one-call API and the ``gpukit_bench`` pytest fixture: checked rows, a failed check fails the test, and a
stored baseline catches a slower run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpukit.bench import compare

N = 1 << 16


def _inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"a": rng.standard_normal(N, dtype=np.float32), "b": rng.standard_normal(N, dtype=np.float32)}


def test_compare_checks_and_splits_each_row() -> None:
    def add_out(a, b, out):
        np.add(a, b, out=out)

    rows = compare(
        {"numpy": lambda a, b: a + b, "fast": ("numpy", add_out), "wrong": ("numpy", lambda a, b: a - b),
         "torch-cpu": lambda a, b: a + b},
        inputs=_inputs,
        reference=lambda a, b: a.astype(np.float64) + b,
        seed=3,
    )  # fmt: skip
    by = {r.backend: r for r in rows}
    assert by["numpy"].ok and by["fast"].ok and by["torch-cpu"].ok
    assert by["wrong"].status == "failed" and "check failed" in (by["wrong"].reason or "")
    r = by["fast"]
    assert r.check and r.error is not None and r.error < 1e-6 and r.tolerance == 1e-5
    assert len(r.samples_s) >= 3 and r.kernel_min_s <= r.kernel_median_s <= r.kernel_max_s  # type: ignore[operator]
    assert r.gbps == pytest.approx(3 * 4 * N / r.call_s / 1e9)  # type: ignore[operator]  (a, b read; out written)
    assert r.speedup is not None and r.compile_s is not None


def test_the_fixture_in_this_repo(gpukit_bench) -> None:
    row = gpukit_bench(lambda a, b: a + b, inputs=_inputs, reference=lambda a, b: a + b, repeat=3)
    assert row.ok and row.gbps and row.gbps > 0 and row.check


PLUGIN_TEST = """
import numpy as np

def inputs(rng):
    return {"a": rng.standard_normal(4096, dtype=np.float32)}

def test_fast(gpukit_bench):
    gpukit_bench(lambda a: a * 2, inputs=inputs, reference=lambda a: a * 2, repeat=5, max_time_s=0.5)

def test_wrong(gpukit_bench):
    gpukit_bench(lambda a: a * 3, inputs=inputs, reference=lambda a: a * 2, repeat=3)

def test_unavailable(gpukit_bench):
    gpukit_bench(lambda a: a * 2, backend="no-such-backend", inputs=inputs, reference=lambda a: a * 2)
"""


def test_plugin_gates_on_the_check_and_the_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bench=PLUGIN_TEST)
    # Installed (CI: pip install -e), pytest loads the plugin through its pytest11 entry point, and naming it with -p
    # as well would register it twice; from a bare source tree only -p loads it.
    from importlib.metadata import entry_points

    installed = any(ep.value == "gpukit.bench.pytest_plugin" for ep in entry_points(group="pytest11"))
    plugin = ("-p", "no:cacheprovider") if installed else ("-p", "gpukit.bench.pytest_plugin", "-p", "no:cacheprovider")
    saved = pytester.runpytest_subprocess(*plugin, "--gpukit-bench-save", "-k", "fast")
    saved.assert_outcomes(passed=1)
    baseline = pytester.path / ".gpukit-bench.json"
    doc = json.loads(baseline.read_text())
    (key,) = doc["rows"]
    assert key.endswith("test_fast::numpy") and doc["rows"][key]["unit"] == "gbps" and doc["rows"][key]["value"] > 0
    assert doc["rows"][key]["stats"]["n"] >= 3 and doc["state"]["versions"]["numpy"]
    assert doc["rows"][key]["medians"] == [doc["rows"][key]["stats"]["median_s"]]
    for _ in range(2):  # each save in the same state keeps the earlier medians: three give the run-to-run band
        pytester.runpytest_subprocess(*plugin, "--gpukit-bench-save", "-k", "fast").assert_outcomes(passed=1)
    doc = json.loads(baseline.read_text())
    assert (
        len(doc["rows"][key]["medians"]) == 3
        and doc["rows"][key]["medians"][-1] == doc["rows"][key]["stats"]["median_s"]
    )
    doc["rows"][key]["medians"] = []  # the check below wants the samples' own band only
    for name in ("median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s"):  # a baseline 1000× faster: this run is SLOWER
        doc["rows"][key]["stats"][name] /= 1000
    doc["rows"][key]["stats"]["n"] = 50
    baseline.write_text(json.dumps(doc))
    res = pytester.runpytest_subprocess(*plugin)
    res.assert_outcomes(failed=2, skipped=1)  # slower than its baseline; wrong; a backend not available here
    text = res.stdout.str()
    assert "SLOWER than its baseline" in text and "check failed" in text and "gpukit_bench" in text
    doc["state"]["machine"]["cpu_model"] = "another CPU"  # a baseline of another machine: refused, or --force
    baseline.write_text(json.dumps(doc))
    refused = pytester.runpytest_subprocess(*plugin, "-k", "fast")
    refused.assert_outcomes(failed=1)
    assert "different hardware states: cpu_model" in refused.stdout.str()
    forced = pytester.runpytest_subprocess(*plugin, "-k", "fast", "--gpukit-bench-force")
    forced.assert_outcomes(failed=1)
    assert "SLOWER than its baseline" in forced.stdout.str()
