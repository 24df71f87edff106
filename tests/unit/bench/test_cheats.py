"""Issue 11 §1: every cheat a suspicious user tried comes back ``failed`` with its reason — never a time.

The cheats are the custom workloads of ``benchmarks/scripts/engine_cheats.py`` (the same file the H200 acceptance
script runs on torch-cuda). Each test here failed on the engine before this change: the harness checked the first
call only, never looked at the inputs again, had no watchdog, let ``sys.exit`` end gpukit, let an implementation
rewrite ``Size.params``, printed a negative throughput, "(tolerance None)", and a figure of any size.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpukit.bench import run
from gpukit.bench.analyse import analyse
from gpukit.bench.custom import load_workload
from gpukit.bench.results import Ceilings, Result
from gpukit.bench.workloads import get_workload
from gpukit.errors import ConfigError

CHEATS = Path(__file__).resolve().parents[3] / "benchmarks" / "scripts" / "engine_cheats.py"


def cheat(name: str):
    return load_workload(f"{CHEATS}:{name}")


def _rows(name: str, backends: tuple[str, ...] = ("numpy", "torch-cpu"), size: str = "4MiB", **kw):
    kw.setdefault("budget_s", 2.0)
    result = run(cheat(name), backends=list(backends), sizes=[size], ceilings=False, repeat=3, seed=1, **kw)
    assert [r.backend for r in result.results] == list(backends)
    return result.results


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("FIRST_CALL_ONLY", "right on the first call, wrong after"),
        ("MUTATES_INPUT", "changed its input 'a'"),
        ("BACKGROUND_THREAD", "right on the first call, wrong after"),
        ("ONCE_PER_BUFFER", "right on the first call, wrong after"),  # passed while timed calls got a new buffer
        ("CALLS_EXIT", "called sys.exit(3)"),
        ("WRITES_SIZE", "TypeError"),
        ("NEGATIVE_AMOUNT", "amount of work per call is -1.0"),
    ],
)
def test_cheat_is_a_failed_row_with_its_reason(name: str, reason: str) -> None:
    for r in _rows(name):
        assert r.status == "failed" and reason in (r.reason or ""), (r.backend, r.reason)
        assert r.kernel_median_s is None and r.gbps is None  # a failure is never a time


def test_an_honest_row_still_passes_every_check() -> None:
    from gpukit.bench.workloads.base import Implementation

    honest = cheat("FIRST_CALL_ONLY")
    honest.implementations["honest"] = Implementation("numpy", load_workload(f"{CHEATS}:IMPOSSIBLE")
                                                      .implementations["numpy"].fn)  # fmt: skip
    (r,) = run(honest, backends=["honest"], sizes=["4MiB"], ceilings=False, repeat=3).results
    assert r.ok and r.check and r.gbps and r.gbps > 0


def test_a_hanging_call_times_out_and_the_run_goes_on() -> None:
    t0 = time.perf_counter()
    rows = _rows("HANGS", call_timeout_s=0.5, budget_s=1.0)
    assert time.perf_counter() - t0 < 10
    assert all(r.status == "failed" and r.reason and r.reason.startswith("timed out") for r in rows)


def test_size_params_are_read_only_for_the_next_implementation() -> None:
    w = cheat("WRITES_SIZE")
    size = w.parse_size("4MiB")
    with pytest.raises(TypeError):
        size.params["n"] = 1  # type: ignore[index]
    assert size["n"] == 4 * 2**20 // 4


def test_a_check_without_tolerance_says_what_it_said() -> None:
    (r,) = _rows("NO_TOLERANCE_CHECK", backends=("numpy",))
    assert r.status == "failed" and "tolerance None" not in (r.reason or "")
    assert "relative error 0.25 (the workload's check said no; it gives no tolerance)" in (r.reason or "")


def test_a_custom_workload_named_like_a_builtin_is_refused() -> None:
    with pytest.raises(ConfigError, match="like gpukit's built-in one"):
        run(cheat("NAMED_LIKE_A_BUILTIN"), ceilings=False)
    with pytest.raises(ConfigError, match="two different workloads"):
        run([cheat("HANGS"), cheat("HANGS")], ceilings=False)  # loaded twice: two objects, one name
    run([get_workload("vector-add"), "vector-add"], device="cpu", backends=["numpy"], sizes=["4KiB"], ceilings=False)


def test_impossible_figure_against_the_ceiling_measured_in_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of cache, 10,000× the bytes moved is far above the CPU copy ceiling. (The cache line is lowered from
    256 MiB so this runs at 4 MiB per operand in a CI second.)"""
    monkeypatch.setattr("gpukit.bench.ceilings.measure_ceilings", lambda **kw: Ceilings(cpu_mem_gbps=20.0))
    monkeypatch.setattr("gpukit.bench.analyse.CACHE_BYTES", 1 << 20)
    result = run(cheat("IMPOSSIBLE"), backends=["numpy"], sizes=["4MiB"], repeat=3, seed=1)
    (r,) = result.results
    assert r.status == "failed" and r.reason and r.reason.startswith("impossible:") and "cpu_mem_gbps" in r.reason
    assert r.gbps is None


def _gpu_row(gbps: float, ws: float = 3 * 2**30, **kw) -> Result:
    return Result("vector-add", "torch-cuda", "cuda", "1GiB:float32", check=True, kernel_median_s=1e-3,
                  kernel_min_s=1e-3, kernel_max_s=1e-3, gbps=gbps, throughput_unit="gbps", working_set_bytes=ws,
                  **kw)  # fmt: skip


H200 = Ceilings(spec_name="NVIDIA H200 SXM", spec_bandwidth_gbps=4800.0, spec_tflops={"bf16": 989.0},
                d2d_copy_gbps=4175.0, cpu_mem_gbps=40.0, measured_at={"d2d_copy_gbps": "1GiB:float32"})  # fmt: skip


def test_impossible_against_the_datasheet_peak() -> None:
    """The H200 report: a first-call-only torch-cuda row printed ok at 921,250 GB/s."""
    seen = _gpu_row(921_250.0)
    gemm = Result("gemm", "cublas", "cuda", "8192:bf16", dtype="bf16", check=True, kernel_median_s=1e-3,
                  kernel_min_s=1e-3, kernel_max_s=1e-3, tflops=2500.0, throughput_unit="tflops")  # fmt: skip
    honest = _gpu_row(4333.0)
    analyse([seen, gemm, honest], H200, {"vector-add": get_workload("vector-add"), "gemm": get_workload("gemm")})
    assert (
        seen.status == "failed"
        and seen.reason == "impossible: 921,250 GB/s > 4,800 GB/s datasheet peak of NVIDIA H200 SXM"
    )
    assert gemm.status == "failed" and "989 TFLOP/s bf16 datasheet peak" in (gemm.reason or "")
    assert honest.ok and honest.pct_of_ceiling == pytest.approx(103.8, abs=0.1)
    # above 100 % of its ceiling, and said why in the table's footnote
    assert honest.ceiling_note and "copy" in honest.ceiling_note and "mix of reads and writes" in honest.ceiling_note


def test_above_the_ceiling_in_cache_is_explained_not_failed() -> None:
    small = _gpu_row(9000.0, ws=24 * 2**20)  # 24 MiB of rotated inputs: in L2, above HBM, below 10x its peak
    pageable = Result("bandwidth", "torch-cuda-h2d-pageable", "cuda", "1MiB:float32", check=True, kernel_median_s=1e-4,
                      kernel_min_s=1e-4, kernel_max_s=1e-4, gbps=35.0, throughput_unit="gbps",
                      working_set_bytes=2 * 2**20, ceiling="h2d_pageable_gbps")  # fmt: skip
    c = Ceilings(**{**H200.__dict__, "h2d_pageable_gbps": 6.6, "measured_at": {"h2d_pageable_gbps": "256MiB:float32"}})
    analyse([small, pageable], c, {"vector-add": get_workload("vector-add"), "bandwidth": get_workload("bandwidth")})
    assert small.ok and small.ceiling_note and "fits in cache" in small.ceiling_note
    assert pageable.ok and pageable.pct_of_ceiling == pytest.approx(530, abs=1)
    assert pageable.ceiling_note and "at 256MiB:float32" in pageable.ceiling_note


def test_quick_ceilings_are_measured_at_the_full_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """--quick measured the device copy at 64 MiB (6 % low on an H200); now the same sizes, fewer samples."""
    from gpukit.bench import ceilings

    seen: list[tuple[bool, str, str, int]] = []

    def fake_run_one(w, name, size, prep, settings):
        seen.append((quick, name, size.label, settings.repeats))
        return Result("bandwidth", name, "cpu", size.label, check=True, kernel_median_s=1.0, kernel_min_s=1.0,
                      kernel_max_s=1.0, gbps=10.0, throughput_unit="gbps")  # fmt: skip

    monkeypatch.setattr(ceilings, "run_one", fake_run_one)
    monkeypatch.setattr(ceilings, "prepare", lambda w, size, rng: None)
    monkeypatch.setattr(ceilings, "add_spec", lambda c: None)
    for quick in (True, False):
        c = ceilings.measure_ceilings(quick=quick, cuda=True)
        assert c.measured_at["d2d_copy_gbps"] == "1GiB:float32" and c.measured_at["cpu_mem_gbps"] == "256MiB:float32"
    sizes = {q: sorted({label for qq, _, label, _ in seen if qq == q}) for q in (True, False)}
    assert sizes[True] == sizes[False] == ["1GiB:float32", "256MiB:float32"]
    # the device copy: --quick stops at the first backend that measured it, the full run takes the best of both
    d2d = {q: [name for qq, name, label, _ in seen if qq == q and label == "1GiB:float32"] for q in (True, False)}
    assert d2d == {True: ["torch-cuda"], False: ["torch-cuda", "cupy"]}


def test_a_smaller_honest_copy_above_a_larger_ceiling_is_not_impossible() -> None:
    """H200, bench --quick (2026-12-01): honest 64 MiB rows failed as impossible against ceilings measured at 256 MiB
    — numba-cpu 173 GB/s against cpu_mem_gbps 77 (the CPU's L3), d2h pageable 11 GB/s against 3.9. A ceiling judges
    only rows of its size or larger; a pageable copy is always bounded by the pinned one of its direction."""
    mib = 2**20

    def row(backend: str, device: str, label: str, x: float, gbps: float, ceiling: str) -> Result:
        return Result("bandwidth", backend, device, label, check=True, kernel_median_s=1e-3, kernel_min_s=1e-3,
                      kernel_max_s=1e-3, gbps=gbps, throughput_unit="gbps", working_set_bytes=4 * x, size_x=x,
                      size_group="float32", ceiling=ceiling)  # fmt: skip

    c = Ceilings(cpu_mem_gbps=77.0, d2h_pageable_gbps=3.9, d2h_pinned_gbps=55.3,
                 measured_at={"cpu_mem_gbps": "256MiB:float32", "d2h_pageable_gbps": "256MiB:float32"},
                 measured_x={"cpu_mem_gbps": 256.0 * mib, "d2h_pageable_gbps": 256.0 * mib})  # fmt: skip
    numba = row("numba-cpu", "cpu", "64MiB:float32", 64.0 * mib, 173.0, "cpu_mem_gbps")
    pageable = row("torch-cuda-d2h-pageable", "cuda", "64MiB:float32", 64.0 * mib, 11.0, "d2h_pageable_gbps")
    cheat_same_size = row("numba-cpu", "cpu", "256MiB:float32", 256.0 * mib, 173.0, "cpu_mem_gbps")
    cheat_pageable = row("torch-cuda-d2h-pageable", "cuda", "64MiB:float32", 64.0 * mib, 900.0, "d2h_pageable_gbps")
    analyse([numba, pageable, cheat_same_size, cheat_pageable], c, {"bandwidth": get_workload("bandwidth")})
    assert numba.ok and pageable.ok
    assert numba.ceiling_note and "its ceiling at 256MiB:float32" in numba.ceiling_note
    assert pageable.pct_of_ceiling == pytest.approx(282, abs=1) and "smaller sizes" in (pageable.ceiling_note or "")
    assert cheat_same_size.status == "failed" and "2.2× the 77 GB/s cpu_mem_gbps" in (cheat_same_size.reason or "")
    assert cheat_pageable.status == "failed" and "d2h_pinned_gbps" in (cheat_pageable.reason or "")
