"""Comparisons call noise; baselines catch a slow node. (The history itself: tests/unit/history/.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpukit.bench.baselines import baseline_from_run, check_baseline, compare_runs, load_baseline
from gpukit.bench.results import Ceilings, Result, Run
from gpukit.errors import ConfigError


def _run(gbps: float, samples: list[float]) -> Run:
    med = sorted(samples)[len(samples) // 2]
    return Run(
        started_at="2026-11-30T05:00:00Z",
        machine={"hostname": "node1", "cpu_count": 2},
        versions={"numpy": "2.4.6"},
        settings={"workloads": ["vector-add"], "quick": True},
        ceilings=Ceilings(cpu_mem_gbps=20.0, gpu_name="NVIDIA H200", notes=["x"]),
        results=[
            Result(
                "vector-add",
                "numpy",
                "cpu",
                "1MiB:float32",
                check=True,
                error=0.0,
                kernel_median_s=med,
                kernel_min_s=min(samples),
                kernel_max_s=max(samples),
                samples_s=samples,
                throughput_unit="gbps",
                gbps=gbps,
                telemetry={"before": None, "after": None},
            ),
            Result("vector-add", "cupy", "cuda", "1MiB:float32", status="skipped", reason="no cupy", hint="pip"),
        ],
    )


def test_compare_classifies_from_the_samples() -> None:
    a = _run(10.0, [1.0, 1.2, 0.8, 1.1, 0.9])  # the middle half spans 20 %
    b = _run(11.0, [1.05, 1.25, 0.85, 1.15, 0.95])  # 5 % slower: within that band
    rows = compare_runs(a, b)
    assert rows[0].ratio == pytest.approx(1.1) and rows[0].verdict == "SAME" and "within the noise band" in rows[0].why
    assert rows[1].verdict == "skipped in both"
    tight = [1.0, 1.01, 0.99, 1.005, 0.995]
    half = [t / 2 for t in tight]
    assert compare_runs(_run(10.0, tight), _run(20.0, half))[0].verdict == "FASTER"
    assert compare_runs(_run(20.0, half), _run(10.0, tight))[0].verdict == "SLOWER"
    assert compare_runs(_run(10.0, tight[:3]), _run(20.0, half[:3]))[0].verdict == "UNSURE"  # 3 samples: no interval


def test_baseline_catches_a_shortfall(tmp_path: Path) -> None:
    base = baseline_from_run(_run(100.0, [1.0] * 5), command="gpukit bench")
    path = tmp_path / "b.json"
    path.write_text(json.dumps(base))
    doc = load_baseline(str(path))
    assert doc["results"][0]["value"] == 100.0
    assert doc["results"][0]["stats"]["median_s"] == 1.0
    same = check_baseline(_run(100.0, [1.0, 1.0, 1.0]), doc, 0.0)
    assert same[0].ok and same[0].verdict == "SAME"
    slow = check_baseline(_run(80.0, [1.25] * 5), doc, 10.0)
    assert not slow[0].ok and slow[0].verdict == "SLOWER" and "more than the 10% allowed" in (slow[0].why or "")
    assert check_baseline(_run(95.0, [1.05] * 5), doc, 10.0)[0].ok  # SLOWER, within the 10 % allowed
    legacy = dict(doc, results=[{k: v for k, v in doc["results"][0].items() if k != "stats"}])  # no samples stored
    ok = check_baseline(_run(95.0, [1.0]), legacy, 10.0)
    assert ok[0].ok and ok[0].verdict == "ok"
    short = check_baseline(_run(80.0, [1.0]), legacy, 10.0)
    assert not short[0].ok and short[0].verdict == "short" and short[0].ratio == pytest.approx(0.8)
    empty = Run(started_at="x")
    assert check_baseline(empty, doc, 10.0)[0].verdict == "not run"
    noisy = dict(legacy, results=[dict(legacy["results"][0], spread=0.25)])
    assert check_baseline(_run(80.0, [1.0]), noisy, 10.0)[0].ok  # within the baseline's own spread
    with pytest.raises(ConfigError):
        load_baseline("no-such-baseline")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError):
        load_baseline(str(tmp_path / "bad.json"))


def test_baseline_keeps_gpu_rows_when_there_are_any() -> None:
    run = _run(10.0, [1.0])
    assert [r["backend"] for r in baseline_from_run(run)["results"]] == ["numpy"]  # CPU-only run: CPU rows
    run.results.append(
        Result(
            "vector-add",
            "torch-cuda",
            "cuda",
            "1MiB:float32",
            kernel_median_s=0.1,
            samples_s=[0.1],
            throughput_unit="gbps",
            gbps=1000.0,
        )
    )
    assert [r["backend"] for r in baseline_from_run(run)["results"]] == ["torch-cuda"]


def test_shipped_h200_baseline_is_the_1gib_gpu_set() -> None:
    """The baseline gpukit ships: every GPU backend's vector add and SAXPY at 1 GiB, measured on an H200, and a
    node at 85% of it is caught on the row that fell short only."""
    from gpukit.bench.baselines import shipped_baselines

    assert "h200" in shipped_baselines()
    doc = load_baseline("h200")
    assert "H200" in (doc["gpu"] or "")
    keys = {(r["workload"], r["backend"], r["size"]) for r in doc["results"]}
    for workload in ("vector-add", "saxpy"):
        for backend in ("torch-cuda", "cupy-cuda-c", "triton"):
            assert (workload, backend, "1GiB:float32") in keys
    assert all(r["device"] == "cuda" and r["unit"] == "gbps" and 1000 < r["value"] < 4800 for r in doc["results"])
    # Replay the baseline as a run: all ok; then one row at 85% of its figure is the only short one.
    rows = [
        Result(r["workload"], r["backend"], "cuda", r["size"], kernel_median_s=r["kernel_median_s"],
               samples_s=[r["kernel_median_s"]], throughput_unit="gbps", gbps=r["value"])
        for r in doc["results"]
    ]  # fmt: skip
    assert all(c.ok for c in check_baseline(Run(started_at="x", results=rows), doc, 10.0))
    slow = next(r for r in rows if r.backend == "cupy-cuda-c" and r.workload == "vector-add")
    slow.gbps = (slow.gbps or 0.0) * 0.85
    checks = check_baseline(Run(started_at="x", results=rows), doc, 10.0)
    assert [(c.backend, c.workload) for c in checks if not c.ok] == [("cupy-cuda-c", "vector-add")]
