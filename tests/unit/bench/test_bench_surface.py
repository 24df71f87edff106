"""Issue 12's bench/history surface: every case printed the wrong thing (or a traceback) before."""

from __future__ import annotations

import time

import pytest

from gpukit.bench.baselines import compare_runs
from gpukit.bench.results import Result, Run
from gpukit.cli.bench_render import RESULT_COLUMNS, crossover_gap, folded


def _err(res) -> str:
    return " ".join(res.stderr.split())


def test_baseline_with_every_row_skipped_is_nothing_to_compare(run_cli) -> None:
    """No GPU here: the H200 baseline's rows are all skipped — not '11 result(s) fall short'."""
    res = run_cli(
        "bench",
        "vector-add",
        "saxpy",
        "--size",
        "1GiB",
        "--device",
        "cuda",
        "--baseline",
        "h200",
        "--no-ceilings",
        "--no-save",
        "--force",
    )  # fmt: skip  (--force: the baseline is another machine's)
    assert res.exit_code == 2, res.stderr
    assert "nothing to compare:" in _err(res) and "skipped here" in _err(res) and "fall short" not in _err(res)
    assert "hint:" in res.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--save-image", "."), "is a directory"),
        (("--seed", "-1"), "bad --seed -1"),
        (("--workload", "examples:WORKLOAD"), "examples is a directory, not a Python file"),
        (("--call-timeout", "-1"), "--call-timeout"),
    ],
)
def test_bad_bench_input_is_error_and_hint(run_cli, args, message) -> None:
    t0 = time.perf_counter()
    res = run_cli("bench", "vector-add", "--no-save", *args)
    assert res.exit_code == 2 and message in _err(res) and "Traceback" not in res.stderr
    assert time.perf_counter() - t0 < 2.0  # refused before anything is measured


def test_help_lists_the_workloads(run_cli) -> None:
    res = run_cli("bench", "--help")
    text = " ".join(res.stdout.split())
    for name in ("vector-add", "saxpy", "mandelbrot", "bandwidth", "gemm", "cnn-train", "mlp-train"):
        assert name in text
    assert "Workloads:" in text


def _row(backend: str, device: str, size: str = "1MiB", status: str = "ok", **kw) -> Result:
    times = {} if status != "ok" else dict(kernel_median_s=1e-3, kernel_min_s=1e-3, kernel_max_s=1e-3,
                                           samples_s=[1e-3] * 3, gbps=10.0, throughput_unit="gbps")  # fmt: skip
    return Result("vector-add", backend, device, size, status=status, **times, **kw)


def test_no_gpu_table_folds_skipped_gpu_rows_per_backend() -> None:
    rows = [_row("numpy", "cpu")] + [
        _row(b, "cuda", s, status="skipped", reason="no CUDA device visible to torch", hint="run on a GPU machine")
        for b in ("torch-cuda", "triton") for s in ("1MiB", "16MiB")
    ]  # fmt: skip
    shown, gone = folded(rows)
    assert [r.backend for r in shown] == ["numpy"]
    assert gone == {"torch-cuda": (2, "no CUDA device visible to torch", "run on a GPU machine"),
                    "triton": (2, "no CUDA device visible to torch", "run on a GPU machine")}  # fmt: skip
    measured = [*rows, _row("cupy", "cuda")]  # a GPU row ran: nothing is folded away
    assert folded(measured) == (measured, {})


def test_a_baseline_of_another_machine_is_refused_before_measuring(run_cli) -> None:
    t0 = time.perf_counter()
    res = run_cli("bench", "vector-add", "--size", "1GiB", "-b", "numpy", "--baseline", "h200", "--no-save")
    assert res.exit_code == 2 and time.perf_counter() - t0 < 10  # nothing measured: no 1 GiB row, no ceilings
    assert "different hardware states" in _err(res) and "gpu_names" in _err(res) and "--force" in _err(res)


def test_first_call_column_is_not_called_compile() -> None:
    assert "first call" in RESULT_COLUMNS and "compile" not in RESULT_COLUMNS


def test_empty_crossover_table_says_why() -> None:
    cpu_only = Run(started_at="x", results=[_row("numpy", "cpu"), _row("torch-cuda", "cuda", status="skipped",
                                                                        reason="no CUDA device")])  # fmt: skip
    assert crossover_gap(cpu_only) == "no GPU row was measured (no CUDA device); a crossover needs both sides"
    apart = Run(started_at="x", results=[_row("numpy", "cpu", "1MiB"), _row("cupy", "cuda", "16MiB")])
    assert "different sizes" in crossover_gap(apart)


def test_history_compare_of_quick_and_full_runs_says_what_was_not_comparable() -> None:
    quick = Run(started_at="a", results=[_row("numpy", "cpu", "16MiB:float32"), _row("torch-cpu", "cpu", "1MiB"),
                                         _row("cupy", "cuda", "1MiB", status="skipped", reason="no cupy")])  # fmt: skip
    full = Run(started_at="b", results=[_row("numpy", "cpu", "256MiB:float32"), _row("torch-cpu", "cpu", "1MiB"),
                                        _row("cupy", "cuda", "1MiB")])  # fmt: skip
    by = {(c.backend, c.size): c.verdict for c in compare_runs(quick, full)}
    assert by[("numpy", "A: 16MiB:float32; B: 256MiB:float32")] == "not comparable: different sizes"
    assert by[("torch-cpu", "1MiB")] == "SAME"
    assert by[("cupy", "1MiB")] == "skipped in A"  # not "not ok"
    assert not [v for v in by.values() if v.startswith("only in")]


def test_history_table_fits_80_columns(run_cli, tmp_path) -> None:
    from gpukit.history import open_history

    db = tmp_path / "h.db"
    with open_history(db) as h:
        h.save_run({"started_at": "2026-11-30T05:00:00Z", "machine": {"hostname": "a-rather-long-hostname-01"},
                    "ceilings": {"gpu_name": "NVIDIA H200 NVL with a long name"},
                    "settings": {"workloads": ["vector-add", "saxpy", "mandelbrot", "bandwidth"], "quick": True},
                    "results": []})  # fmt: skip
    res = run_cli("history", "list", "--db", str(db))
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert any("vector-add" in line for line in lines) and max(len(line) for line in lines) <= 80, res.stdout


def test_array_backend_mandelbrot_estimate_measures_per_pixel_cost() -> None:
    """An array-expression backend (torch-cpu) pays a fixed cost per operation whatever the frame. The estimate
    used to scale a small frame's time — mostly that fixed cost — by the pixel ratio: 69 s estimated for a call
    that takes 0.2-2.7 s. A fake call costing 20 ms + 20 ns per pixel (sleeps: immune to a busy CI machine) is
    now estimated within 30 %; the old rule said 10× more."""
    from gpukit.bench.workloads.mandelbrot import _estimator, parse_size

    def fake(inputs, out, size) -> None:
        time.sleep(0.02 + 2e-8 * size["width"] * size["height"])

    frame = parse_size("1536x1024x20")
    expected = 0.02 + 2e-8 * 1536 * 1024
    est = _estimator("fake-array-test", fake, "numpy", 65536, linear=True)(frame)
    assert est == pytest.approx(expected, rel=0.3)
    old_rule = _estimator("fake-array-test-old", fake, "numpy", 65536)(frame)  # one small frame × pixel ratio
    assert old_rule > 5 * expected
