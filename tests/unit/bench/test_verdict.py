"""The one comparison (bench/verdict.py): synthetic sample sets with known shifts, and hardware states that differ."""

from __future__ import annotations

import numpy as np
import pytest

from gpukit.bench.baselines import StateDiffers, baseline_from_run, check_baseline, compare_runs
from gpukit.bench.results import Result, Run
from gpukit.bench.verdict import Spread, classify, median_interval, state_differences

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
