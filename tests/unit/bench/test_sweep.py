"""Crossover logic against a fake device whose timings are known in closed form."""

from __future__ import annotations

import math

import pytest

from gpukit.bench.results import Result, legacy_size
from gpukit.bench.sweep import SizePoint, crossovers, find_crossover

SIZES = [2**k for k in range(6, 15)]  # 64 … 16384


def _row(workload, backend, device, label, t, *, spread=0.02, h2d=0.0, d2h=0.0, status="ok"):
    x, group = legacy_size(label)  # what the engine's Size carries on a measured row
    return Result(
        workload=workload,
        backend=backend,
        device=device,
        size=label,
        status=status,
        kernel_median_s=t if status == "ok" else None,
        kernel_min_s=t * (1 - spread) if status == "ok" else None,
        kernel_max_s=t * (1 + spread) if status == "ok" else None,
        h2d_s=h2d,
        d2h_s=d2h,
        size_x=x,
        size_group=group,
    )


def fake_device(cpu_per_item, gpu_launch_s, gpu_per_item, *, group="fp32", h2d_per_item=0.0):
    """CPU time = a·x; GPU time = launch + b·x: the two lines cross at x* = launch / (a − b)."""
    rows = []
    for x in SIZES:
        label = f"{x}-{group}"
        rows.append(_row("w", "cpu-impl", "cpu", label, cpu_per_item * x))
        rows.append(_row("w", "slower-cpu", "cpu", label, 3 * cpu_per_item * x))  # best CPU is the one compared
        rows.append(_row("w", "gpu-impl", "cuda", label, gpu_launch_s + gpu_per_item * x, h2d=h2d_per_item * x))
    return rows


def test_legacy_size_reads_labels_of_rows_saved_before_size_x():
    assert legacy_size("4096-bf16") == (4096.0, "bf16")
    assert legacy_size("1GiB") == (2.0**30, "")
    assert legacy_size("1536x1024x20") == (1536 * 1024 * 20, "")
    assert legacy_size("nonsense") == (None, "")


def test_crossover_of_linear_fake_device_is_interpolated_near_the_analytic_point():
    # a = 1e-6 s/item, launch 1e-3 s, b = 1e-8 → x* = 1e-3 / (1e-6 − 1e-8) ≈ 1010
    rows = fake_device(1e-6, 1e-3, 1e-8)
    kernel = [c for c in crossovers(rows) if c.mode == "kernel"]
    assert len(kernel) == 1
    c = kernel[0]
    assert (c.workload, c.group, c.status) == ("w", "fp32", "crosses")
    assert c.size_label == "2048-fp32" and c.below_label == "1024-fp32"
    # at 1024 the GPU is only 1% faster (inside the 2% spread): a tie, so 2048 is the first clear win
    x_star = 1e-3 / (1e-6 - 1e-8)
    assert c.x_estimate is None or abs(math.log(c.x_estimate / x_star)) < math.log(2.0)
    assert [p.cpu_backend for p in c.points] == ["cpu-impl"] * len(SIZES)
    assert c.points[0].verdict == "cpu" and c.points[-1].verdict == "gpu"


def test_interpolation_lands_between_neighbours():
    lo = SizePoint("512", 512, "c", "g", 1.0, 2.0, (0.99, 1.01), (1.98, 2.02))  # speedup 0.5
    hi = SizePoint("1024", 1024, "c", "g", 2.0, 1.0, (1.98, 2.02), (0.99, 1.01))  # speedup 2
    c = find_crossover("w", "", "kernel", [hi, lo])
    assert c.status == "crosses" and c.size_label == "1024"
    assert c.x_estimate == pytest.approx(math.sqrt(512 * 1024))  # symmetric in log space


def test_end_to_end_transfers_move_the_crossover_up():
    # transfers cost 5e-7 s per item: GPU end to end = 1e-3 + 5.1e-7·x, x* ≈ 1e-3 / (1e-6 − 5.1e-7) ≈ 2041
    rows = fake_device(1e-6, 1e-3, 1e-8, h2d_per_item=5e-7)
    by_mode = {c.mode: c for c in crossovers(rows)}
    k, e = by_mode["kernel"], by_mode["end_to_end"]
    assert e.status == "crosses"
    assert legacy_size(e.size_label)[0] > legacy_size(k.size_label)[0]  # type: ignore[operator]


def test_transfers_slower_than_the_cpu_mean_never():
    rows = fake_device(1e-6, 1e-4, 1e-8, h2d_per_item=2e-6)  # moving the data alone costs more than the CPU's work
    by_mode = {c.mode: c for c in crossovers(rows)}
    assert by_mode["kernel"].status == "crosses"
    assert by_mode["end_to_end"].status == "never"
    assert by_mode["end_to_end"].size_label is None


def test_gpu_always_and_never():
    assert crossovers(fake_device(1e-6, 1e-9, 1e-8), modes=("kernel",))[0].status == "gpu_always"
    assert crossovers(fake_device(1e-8, 1e-3, 1e-8), modes=("kernel",))[0].status == "never"


def test_flip_flop_counts_only_a_win_that_lasts():
    # speedups 0.5, 2 (lucky), 0.5, 2, 3: the crossover is the second run of wins, not the first
    speedups = [0.5, 2.0, 0.5, 2.0, 3.0]
    pts = [
        SizePoint(str(x), x, "c", "g", s, 1.0, (s * 0.99, s * 1.01), (0.99, 1.01))
        for x, s in zip([1, 2, 4, 8, 16], speedups, strict=True)
    ]
    c = find_crossover("w", "", "kernel", pts)
    assert c.status == "crosses" and c.size_label == "8" and c.below_label == "4"


def test_ties_after_the_crossover_do_not_undo_it_but_a_loss_does():
    def pts(speedups):
        return [
            SizePoint(str(2**i), 2**i, "c", "g", s, 1.0, (s * 0.9, s * 1.1), (0.9, 1.1)) for i, s in enumerate(speedups)
        ]

    assert find_crossover("w", "", "kernel", pts([0.5, 2.0, 1.05, 3.0])).size_label == "2"  # tie at 4
    assert find_crossover("w", "", "kernel", pts([0.5, 2.0, 0.5, 3.0])).size_label == "8"  # loss at 4
    assert find_crossover("w", "", "kernel", pts([0.5, 0.5, 2.0, 0.5])).status == "never"  # last size lost


def test_a_tie_the_cpu_leads_on_median_is_not_staying_ahead():
    def pts(speedups):
        return [
            SizePoint(str(2**i), 2**i, "c", "g", s, 1.0, (s * 0.7, s * 1.5), (0.9, 1.1)) for i, s in enumerate(speedups)
        ]

    # the H200 MLP shape: a win at one size, then ties with the CPU ahead on median up to the largest size
    assert find_crossover("w", "", "kernel", pts([0.5, 2.0, 0.8, 0.8])).status == "never"
    assert find_crossover("w", "", "kernel", pts([0.5, 2.0, 0.8, 2.0])).size_label == "8"
    assert find_crossover("w", "", "kernel", pts([0.5, 2.0, 1.2, 2.0])).size_label == "2"  # GPU leads the tie


def test_groups_failed_rows_and_missing_sides():
    rows = fake_device(1e-6, 1e-3, 1e-8, group="bf16") + fake_device(1e-6, 1e-3, 1e-8, group="fp32")
    rows.append(_row("w", "gpu-impl", "cuda", "99999-fp8", 1e-3))  # GPU only: no comparison
    rows.append(_row("w", "cpu-impl", "cpu", "64-int8", 0.0, status="skipped"))
    found = crossovers(rows)
    assert sorted({(c.group, c.mode) for c in found}) == [
        ("bf16", "end_to_end"),
        ("bf16", "kernel"),
        ("fp32", "end_to_end"),
        ("fp32", "kernel"),
    ]
    single = crossovers([_row("w", "a", "cpu", "64", 1.0), _row("w", "b", "cuda", "64", 0.5)], modes=("kernel",))
    assert single[0].status == "insufficient"
    assert single[0].to_dict()["points"][0]["speedup"] == pytest.approx(2.0)


def test_launch_bound_gpu_rows_cross_over_at_the_rate_python_gets():
    """Device time alone would put the GPU ahead from the smallest size; per call from Python (launch 40 µs) it only
    wins once the CPU's time passes the launch."""
    rows = []
    for n, cpu_t in [(1024, 2e-5), (4096, 8e-5), (16384, 3.2e-4)]:
        rows.append(_row("w", "cpu-impl", "cpu", str(n), cpu_t))
        gpu = _row("w", "gpu-impl", "cuda", str(n), 5e-6)
        gpu.launch_s = 4e-5
        rows.append(gpu)
    kernel = crossovers(rows, modes=("kernel",))[0]
    assert kernel.status == "crosses" and kernel.size_label == "4096" and kernel.below_label == "1024"
    assert [p.gpu_s for p in kernel.points] == [4e-5] * 3  # the launch, not the 5 µs on the device
