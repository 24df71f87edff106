"""`gpukit bench` and `gpukit history` in-process: JSON contract, history, baselines, user workloads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

REQUIRED = {
    "workload",
    "backend",
    "device",
    "size",
    "status",
    "reason",
    "check",
    "error",
    "compile_s",
    "h2d_s",
    "kernel_median_s",
    "kernel_min_s",
    "kernel_max_s",
    "d2h_s",
    "gbps",
    "giter_per_s",
    "tflops",
    "samples_per_s",
    "pct_of_ceiling",
}
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "my_workload.py"


def test_bench_json_contract_and_history(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    res = run_cli(
        "bench", "vector-add", "--size", "64KiB", "-b", "numpy", "-b", "cupy", "--repeat", "3", "--json", "--db", db
    )
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    rows = doc["results"]
    assert {r["backend"] for r in rows} == {"numpy", "cupy", "cupy-cuda-c", "cupy-cuda-c-naive"}
    for r in rows:
        assert set(r) >= REQUIRED
    numpy_row = next(r for r in rows if r["backend"] == "numpy")
    assert numpy_row["status"] == "ok" and numpy_row["check"] is True and numpy_row["gbps"] > 0
    assert numpy_row["pct_of_ceiling"] is not None and doc["ceilings"]["cpu_mem_gbps"] > 0
    assert all(r["status"] == "skipped" and r["reason"] for r in rows if r["backend"].startswith("cupy"))

    listing = run_cli("history", "--db", db, "--json")
    runs = json.loads(listing.stdout)["runs"]
    assert len(runs) == 1 and runs[0]["n_ok"] == 1
    shown = run_cli("history", "show", str(runs[0]["id"]), "--db", db, "--json")
    assert json.loads(shown.stdout)["results"][0]["kernel_median_s"] == numpy_row["kernel_median_s"]
    run_cli("bench", "vector-add", "--size", "64KiB", "-b", "numpy", "--repeat", "3", "--db", db, "--no-ceilings")
    cmp = run_cli("history", "compare", "1", "2", "--db", db)
    assert cmp.exit_code == 0 and "numpy" in cmp.stdout and "B/A" in cmp.stdout
    missing = run_cli("history", "show", "7", "--db", db)
    assert missing.exit_code == 2 and "no run 7" in missing.stderr  # bad input, not a broken history
    assert run_cli("history", "compare", "1", "9", "--db", db).exit_code == 2


def test_baseline_shortfall_exits_1(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    saxpy = ["bench", "saxpy", "--size", "64KiB", "-b", "numpy", "--repeat", "5", "--no-ceilings", "--max-time", "1"]
    res = run_cli(*saxpy, "--db", str(tmp_path / "r.db"), "--write-baseline", str(base))
    assert res.exit_code == 0
    doc = json.loads(base.read_text())
    assert doc["format"] == "gpukit-baseline" and doc["results"][0]["backend"] == "numpy"
    stats = doc["results"][0]["stats"]
    for name in ("median_s", "q1_s", "q3_s", "ci_low_s", "ci_high_s"):  # a node 1000× slower than its baseline
        stats[name] /= 1000
    base.write_text(json.dumps(doc))
    res = run_cli(*saxpy, "--no-save", "--baseline", str(base), "--tolerance", "10%")
    assert res.exit_code == 1 and "SLOWER" in res.stdout and "slower than baseline" in res.stderr


def test_seed_example_and_csv(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    res = run_cli("bench", "--seed-example", "--device", "cpu", "--repeat", "3", "--no-save")
    assert res.exit_code == 0, res.stderr
    assert "C = [8, 10, 12, 14, 16, 18]" in res.stdout
    res = run_cli(
        "bench", "vector-add", "--size", "1KiB", "-b", "numpy", "--repeat", "3", "--no-save", "--no-ceilings", "--csv"
    )
    assert res.stdout.splitlines()[0].startswith("workload,backend,device,size,status")


def test_user_workload_from_file(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    res = run_cli(
        "bench",
        "--workload",
        f"{EXAMPLE}:WORKLOAD",
        "--size",
        "64KiB",
        "--device",
        "cpu",
        "--repeat",
        "3",
        "--no-save",
        "--no-ceilings",
        "--json",
    )
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)["results"]
    assert rows and all(r["workload"] == "softplus" for r in rows)
    assert {r["backend"] for r in rows if r["status"] == "ok"} >= {"numpy", "torch-cpu"}


def test_bad_input_exits_2(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    assert run_cli("bench", "no-such-workload", "--no-save").exit_code == 2
    assert run_cli("bench", "vector-add", "--size", "lots", "--no-save").exit_code == 2
    assert run_cli("bench", "--workload", "nofile.py:X", "--no-save").exit_code == 2
    assert run_cli("bench", "vector-add", "--tolerance", "abc", "--no-save").exit_code == 2
    res = run_cli("bench", "vector-add", "saxpy", "--size", "4KiB:int32", "--no-save")  # saxpy is float32 only
    assert res.exit_code == 2 and "saxpy: unsupported dtype 'int32'" in res.stderr
    factory = tmp_path / "factory.py"
    factory.write_text("def make():\n    raise RuntimeError('no such device')\n")
    res = run_cli("bench", "--workload", f"{factory}:make", "--no-save")
    assert res.exit_code == 2 and "no such device" in res.stderr  # a failing factory is not a traceback


def test_bad_baseline_refused_before_measuring(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """A wrong --baseline is found before the run, not after minutes of measuring (no run is made or saved)."""
    db = tmp_path / "r.db"
    res = run_cli(
        "bench", "saxpy", "--size", "64KiB", "-b", "numpy", "--repeat", "3", "--db", str(db), "--baseline", "nosuch"
    )
    assert res.exit_code == 2 and "no baseline 'nosuch'" in res.stderr
    assert not db.exists()
    res = run_cli("bench", "saxpy", "--db", str(db), "--baseline", str(tmp_path))  # a folder, not a file
    assert res.exit_code == 2 and "cannot read baseline" in res.stderr
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": "gpukit-baseline", "results": [{"workload": "saxpy"}]}))
    res = run_cli("bench", "saxpy", "--db", str(db), "--baseline", str(broken))
    assert res.exit_code == 2 and "results[0] lacks" in res.stderr


def test_unwritable_output_paths_exit_2(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = ("bench", "vector-add", "--size", "1KiB", "-b", "numpy", "--repeat", "3", "--no-save", "--no-ceilings")
    for flag in ("--markdown", "--write-baseline"):
        res = run_cli(*args, flag, str(blocker / "out"))
        assert res.exit_code == 2 and "cannot write" in res.stderr, (flag, res.stderr)
    out = tmp_path / "deep" / "t.md"
    assert run_cli(*args, "--markdown", str(out)).exit_code == 0
    assert "vector-add" in out.read_text() and not list(out.parent.glob(".*.tmp"))


def test_baseline_with_no_row_in_common_is_not_a_pass(run_cli: Callable[..., Any]) -> None:
    """--baseline h200 (1 GiB GPU rows) against a 64 KiB numpy run compares nothing: exit 2, not a silent 0."""
    res = run_cli(
        "bench", "vector-add", "--size", "64KiB", "-b", "numpy", "--repeat", "3", "--no-save", "--no-ceilings",
        "--baseline", "h200", "--force",
    )  # fmt: skip
    assert res.exit_code == 2 and "measured none of the" in res.stderr
    assert "--size 1GiB" in res.stderr  # the hint gives the baseline's own command


def test_launch_bound_rows_are_marked_and_explained() -> None:
    from gpukit.bench.results import Result, Run
    from gpukit.cli import bench_render

    tiny = Result("mandelbrot", "cupy-cuda-c", "cuda", "1536x1024x20", kernel_median_s=5e-6, kernel_min_s=4e-6,
                  kernel_max_s=6e-6, launch_s=3e-5)  # fmt: skip
    big = Result("vector-add", "cupy-cuda-c", "cuda", "1GiB", kernel_median_s=7.4e-4, kernel_min_s=7.3e-4,
                 kernel_max_s=7.5e-4, launch_s=2e-5)  # fmt: skip
    cpu = Result("vector-add", "numpy", "cpu", "1GiB", kernel_median_s=0.1, kernel_min_s=0.1, kernel_max_s=0.1)
    assert tiny.launch_bound and not big.launch_bound and not cpu.launch_bound
    rows = bench_render.results_rows([tiny, big, cpu])
    assert rows[0][6].endswith("‡") and "‡" not in rows[1][6] and "‡" not in rows[2][6]
    md = bench_render.to_markdown(Run(started_at="2026-11-30T00:00:00Z", results=[tiny, big, cpu]))
    assert "‡ launch-bound" in md and "30 µs to launch" in md
    assert bench_render.launch_note([big, cpu]) is None
