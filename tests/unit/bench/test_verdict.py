"""The one comparison (bench/verdict.py): synthetic sample sets with known shifts, and hardware states that differ."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from gpukit.bench.baselines import StateDiffers, baseline_from_run, check_baseline, compare_runs, run_to_run_bands
from gpukit.bench.results import Result, Run
from gpukit.bench.verdict import RunToRun, Spread, classify, median_interval, state_differences

NOISE = 0.005  # relative standard deviation of one sample: a settled row on a GPU


def _samples(rng: np.random.Generator, median_s: float, n: int = 20, noise: float = NOISE) -> list[float]:
    """``n`` samples around ``median_s``: normal noise plus, now and then, a slow outlier (a preempted sample)."""
    t = median_s * (1 + noise * rng.standard_normal(n))
    slow = rng.random(n) < 0.05
    t[slow] *= 1.1
    return t.tolist()


def _pairs(shift: float, pairs: int = 200, seed: int = 0) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    out: dict[str, int] = {}
    for _ in range(pairs):
        a = Spread.from_samples(_samples(rng, 1e-3))
        b = Spread.from_samples(_samples(rng, 1e-3 * (1 + shift)))
        v = classify(a, b).verdict
        out[v] = out.get(v, 0) + 1
    return out


def test_identical_distributions_come_out_same() -> None:
    got = _pairs(0.0)
    assert got.get("SAME", 0) >= 0.99 * 200 and not got.get("SLOWER") and not got.get("FASTER"), got


def test_two_per_cent_slower_is_slower_in_95_per_cent_of_pairs() -> None:
    got = _pairs(0.02)
    assert got.get("SLOWER", 0) >= 0.95 * 200 and not got.get("FASTER") and not got.get("SAME"), got


def test_five_per_cent_slower_is_always_slower_and_faster_is_faster() -> None:
    assert _pairs(0.05) == {"SLOWER": 200}
    assert _pairs(-0.05) == {"FASTER": 200}


def test_few_noisy_samples_of_one_distribution_rarely_differ() -> None:
    rng = np.random.default_rng(1)
    for n, most in ((4, 0), (5, 10), (10, 4)):  # false FASTER/SLOWER out of 400 pairs (4 samples: never)
        verdicts = [classify(Spread.from_samples(_samples(rng, 1.0, n, 0.05)),
                             Spread.from_samples(_samples(rng, 1.0, n, 0.05))).verdict for _ in range(400)]  # fmt: skip
        assert sum(v in ("SLOWER", "FASTER") for v in verdicts) <= most, (n, verdicts.count("SLOWER"))
    few = classify(Spread.from_samples([1.0, 1.0]), Spread.from_samples([2.0, 2.0]))
    assert few.verdict == "UNSURE" and "fewer than 3" in few.why


def test_median_interval_is_distribution_free() -> None:
    t = sorted(
        float(i) for i in range(1, 21)
    )  # n = 20: the 90 % interval is X(6)..X(15) (covers 95.9 %; X(7)..X(14) only 88.5 %)
    assert median_interval(t) == (6.0, 15.0)
    assert median_interval([1.0, 2.0, 3.0]) == (1.0, 3.0)  # too few for 90 %: the whole range
    lo, hi = median_interval(sorted(np.linspace(0, 1, 1001).tolist()))
    assert 0.45 < lo < 0.5 < hi < 0.55
    s = Spread.from_samples([3.0, 1.0, 2.0, 4.0, 5.0])
    assert s.median_s == 3.0 and s.q1_s == 2.0 and s.q3_s == 4.0 and Spread.from_dict(s.to_dict()) == s


def _state(**gpu: object) -> dict[str, object]:
    base = {"name": "NVIDIA H200", "serial": "1650924060001", "app_sm_clock_mhz": 1980, "power_limit_w": 700.0,
            "persistence_mode": True, "ecc_enabled": True}  # fmt: skip
    return {"machine": {"driver_version": "570.86.15", "gpu_state": [{**base, **gpu}]}, "versions": {"torch": "2.11"}}


def test_hardware_states_that_differ_are_named() -> None:
    assert state_differences(_state(), _state()) == []
    assert state_differences(_state(), _state(serial="1650924060002")) == [
        "GPU 0 serial: 1650924060001 vs 1650924060002"
    ]
    assert state_differences(_state(), _state(app_sm_clock_mhz=1500, persistence_mode=False)) == [
        "GPU 0 app_sm_clock_mhz: 1980 vs 1500",
        "GPU 0 persistence_mode: True vs False",
    ]
    other = _state()
    other["versions"] = {"torch": "2.12"}
    assert state_differences(_state(), other) == ["torch 2.11 vs 2.12"]
    assert state_differences(_state(), _state(serial=None)) == []  # unknown is not a difference


def _run(median_s: float, seed: int, **gpu: object) -> Run:
    samples = _samples(np.random.default_rng(seed), median_s)
    row = Result("vector-add", "torch-cuda", "cuda", "1GiB:float32", throughput_unit="gbps", gbps=1.0 / median_s,
                 kernel_median_s=float(np.median(samples)), samples_s=samples)  # fmt: skip
    state = _state(**gpu)
    return Run(started_at="x", machine=state["machine"], versions=state["versions"], results=[row])  # type: ignore[arg-type]


def test_history_compare_and_baseline_use_the_one_comparison_and_refuse_another_state() -> None:
    a, same, slow = _run(1e-3, 1), _run(1e-3, 2), _run(1.05e-3, 3)
    assert compare_runs(a, same)[0].verdict == "SAME"
    assert compare_runs(a, slow)[0].verdict == "SLOWER" and compare_runs(slow, a)[0].verdict == "FASTER"
    hot = _run(1e-3, 4, app_sm_clock_mhz=1500)
    with pytest.raises(StateDiffers, match="app_sm_clock_mhz: 1980 vs 1500") as exc:
        compare_runs(a, hot)
    assert "--force" in (exc.value.hint or "")
    marked = compare_runs(a, hot, force=True)[0]
    assert marked.state_differs and marked.verdict == "SAME"
    doc = baseline_from_run(a)
    assert doc["results"][0]["stats"]["n"] == 20
    check = check_baseline(slow, doc, 0.0)[0]
    assert check.verdict == "SLOWER" and not check.ok
    assert check_baseline(slow, doc, 10.0)[0].ok  # SLOWER by 5 %, within a 10 % allowance
    assert check_baseline(same, doc, 0.0)[0].verdict == "SAME"
    with pytest.raises(StateDiffers):
        check_baseline(hot, doc, 0.0)


def test_rows_that_never_settled_are_never_called_same() -> None:
    a, b = _run(1e-3, 1), _run(1e-3, 2)
    assert compare_runs(a, b)[0].verdict == "SAME"
    b.results[0].settled = False  # its spread stayed above the noise target: within its band says little
    row = compare_runs(a, b)[0]
    assert row.verdict == "UNSURE" and "never settled" in (row.why or "")
    slower = _run(1.05e-3, 3)
    slower.results[0].settled = False
    assert compare_runs(a, slower)[0].verdict == "SLOWER"  # beyond the band with intervals apart: still SLOWER


def test_a_baseline_file_is_a_reference_for_the_gpu_model_not_for_one_machine() -> None:
    """`--baseline h200` on another H200 (another serial, host, GPU count, driver or torch): compared and marked;
    another GPU model or other application clocks: still refused."""
    doc = baseline_from_run(_run(1e-3, 1))
    doc["machine"] = {**doc["machine"], "gpu_count": 2, "gpu_names": ["NVIDIA H200", "NVIDIA H200"]}
    other_node = _run(1e-3, 2, serial="1650924060999")
    other_node.machine = {**other_node.machine, "driver_version": "580.1", "gpu_count": 1, "gpu_names": ["NVIDIA H200"]}
    other_node.versions = {"torch": "2.12"}
    with pytest.raises(StateDiffers):  # the machine scope (a stored run of this machine) refuses all of it
        check_baseline(other_node, doc, 0.0)
    check = check_baseline(other_node, doc, 0.0, scope="model")[0]
    assert check.verdict == "SAME" and check.state_differs
    with pytest.raises(StateDiffers, match="app_sm_clock_mhz"):
        check_baseline(_run(1e-3, 3, app_sm_clock_mhz=1500), doc, 0.0, scope="model")
    with pytest.raises(StateDiffers, match="name: NVIDIA H200 vs NVIDIA H100"):
        check_baseline(_run(1e-3, 4, name="NVIDIA H100"), doc, 0.0, scope="model")


def _process_runs(rng: np.random.Generator, n: int, run_noise: float, shift: float = 0.0) -> list[Run]:
    """``n`` runs of one row as separate processes give them: each run's median moved by ``run_noise`` (relative
    standard deviation: a boost clock, where the buffers landed) while its own 10 samples spread only 0.2 %."""
    runs = []
    for i in range(n):
        median = 1e-3 * (1 + shift) * (1 + run_noise * rng.standard_normal())
        samples = (median * (1 + 0.002 * rng.standard_normal(10))).tolist()
        row = Result("vector-add", "torch-cuda", "cuda", "16MiB:float32", throughput_unit="gbps", gbps=1 / median,
                     kernel_median_s=median, samples_s=samples)  # fmt: skip
        state = _state()
        runs.append(Run(started_at="x", machine=state["machine"], versions=state["versions"], results=[row], id=i))  # type: ignore[arg-type]
    return runs


def test_run_to_run_noise_from_the_history_turns_process_noise_into_same_and_keeps_a_real_change() -> None:
    """Unchanged reruns whose medians move 0.5 % from process to process, samples 0.2 % within one: by their samples
    alone most pairs differ; with the other runs' medians (the history) at least 99 % are SAME, and a 5 % slower
    run is SLOWER every time."""
    rng = np.random.default_rng(7)
    alone, with_history, slower = Counter(), Counter(), Counter()
    for _ in range(40):
        runs = _process_runs(rng, 22, 0.005)
        for a, b in zip(runs[:-1:2], runs[1::2], strict=True):
            alone[compare_runs(a, b)[0].verdict] += 1
            with_history[compare_runs(a, b, others=runs)[0].verdict] += 1
        moved = _process_runs(rng, 1, 0.005, shift=0.05)[0]
        slower[compare_runs(runs[0], moved, others=runs[1:])[0].verdict] += 1
    assert alone["SAME"] < 0.6 * sum(alone.values()), alone  # the phantom regressions of comparing samples alone
    assert with_history["SAME"] >= 0.99 * sum(with_history.values()), with_history
    assert slower == Counter({"SLOWER": 40}), slower


def test_the_run_to_run_band_needs_three_other_runs_of_the_same_state_and_says_which_band_decided() -> None:
    rng = np.random.default_rng(3)
    runs = _process_runs(rng, 6, 0.01)
    assert RunToRun.from_medians([1.0, 1.01]) is None and RunToRun.from_medians([1.0, 0.0, 1.0]) is None
    band = RunToRun.from_medians([1.0, 1.02, 0.99, 1.01])
    assert band is not None and band.runs == 4 and band.band == pytest.approx(1.5 * 0.03 / 1.005)
    assert RunToRun.from_medians([1.0 + i / 100 for i in range(30)]).runs == 20  # type: ignore[union-attr]
    a, b = runs[0], runs[1]
    assert run_to_run_bands(runs[2:4], a) == {}  # two other runs: unknown
    row = compare_runs(a, b, others=runs)[0]  # four others (a and b themselves are left out)
    assert "run-to-run band" in (row.why or "") and "4 other runs" in (row.why or "")
    other_gpu = [replace(r, machine=_state(serial="1650924060009")["machine"]) for r in runs[2:]]
    assert run_to_run_bands(other_gpu, a) == {}  # another GPU's runs say nothing about this one's noise
    alone = compare_runs(a, b)[0]
    assert "run-to-run noise unknown" in (alone.why or "")
    twin = _process_runs(rng, 1, 0.0, shift=statistics.median(a.results[0].samples_s) / 1e-3 - 1)[0]
    twin = replace(twin, id=99)
    twin.results[0].settled = False  # never settled within its run: the history's medians still measured its noise
    assert compare_runs(a, twin, others=runs)[0].verdict == "SAME" and compare_runs(a, twin)[0].verdict == "UNSURE"


def test_a_baseline_written_from_a_history_carries_the_run_to_run_band() -> None:
    rng = np.random.default_rng(5)
    runs = _process_runs(rng, 8, 0.01)
    doc = baseline_from_run(runs[-1], others=runs)
    rr = doc["results"][0]["run_to_run"]
    medians = [statistics.median(r.results[0].samples_s) for r in runs]
    assert rr["runs"] == 8 and rr["band"] == pytest.approx(1.5 * (max(medians) - min(medians)) / np.median(medians))
    base = doc["results"][0]["stats"]["median_s"]  # a run half a band slower than the baseline's own
    inside = _process_runs(np.random.default_rng(11), 1, 0.0, shift=base / 1e-3 * (1 + 0.5 * rr["band"]) - 1)[0]
    assert check_baseline(inside, doc, 0.0)[0].verdict in ("SAME", "FASTER")  # within the band: not SLOWER
    assert baseline_from_run(runs[-1])["results"][0]["run_to_run"] is None  # no history, no band
