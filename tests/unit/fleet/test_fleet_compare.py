"""compare_nodes: which settings make two acceptances incomparable, and the noise call on the figures."""

from __future__ import annotations

import pytest

import fleet_synthetic as synth
from gpukit.errors import ConfigError
from gpukit.fleet.compare import compare_nodes, settings_of
from gpukit.fleet.record import Acceptance

# what accept's NVML snapshot (fleet/telemetry.py Health) holds before a run: settings and readings mixed
BEFORE = {"index": 0, "power_limit_w": 700.0, "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980, "mem_clock_mhz": 3201,
          "mem_clock_max_mhz": 3201, "app_sm_clock_mhz": 1785, "ecc_enabled": True, "temperature_c": 41,
          "pcie_gen": 5, "throttle_reasons": []}  # fmt: skip


def _with_before(rec: dict, **changes: object) -> dict:
    for g in rec["gpus"]:
        g["telemetry"]["before"] = {**BEFORE, **changes}
    return rec


def test_settings_are_limits_clocks_chosen_and_ecc_not_readings() -> None:
    acc = Acceptance.from_dict(_with_before(synth.acceptance("a", 1)))
    assert settings_of(acc) == {
        "driver": "580.159.04",
        "CUDA": "13.0",
        "software stack": "drv580.159.04 cuda13.0 torch2.11.0 gpukit0.1",
        "power_limit_w of GPU 0": 700.0,
        "sm_clock_max_mhz of GPU 0": 1980,
        "mem_clock_max_mhz of GPU 0": 3201,
        "app_sm_clock_mhz of GPU 0": 1785,
        "ecc_enabled of GPU 0": True,
    }


def test_a_reading_that_differs_does_not_make_nodes_incomparable() -> None:
    a = _with_before(synth.acceptance("a", 2, seed=1))
    b = _with_before(synth.acceptance("b", 2, seed=2), sm_clock_mhz=1410, temperature_c=60)
    assert compare_nodes([a, b], "a", "b").comparable


@pytest.mark.parametrize(
    ("change", "what"),
    [({"ecc_enabled": False}, "ecc_enabled of GPU 0"), ({"app_sm_clock_mhz": 1410}, "app_sm_clock_mhz of GPU 0")],
)
def test_a_setting_that_differs_is_named(change: dict, what: str) -> None:
    a = _with_before(synth.acceptance("a", 2, seed=1))
    b = _with_before(synth.acceptance("b", 2, seed=2), **change)
    c = compare_nodes([a, b], "a", "b")
    assert not c.comparable and what in [d.what for d in c.differences]


def test_a_real_difference_is_called_and_noise_is_not() -> None:
    a = synth.acceptance("a", 8, seed=1)
    b = synth.acceptance("b", 8, seed=2, slowed={i: ("hbm_copy_gbps", 0.04) for i in range(8)})
    figs = {f.figure: f for f in compare_nodes([a, b], "a", "b").figures}
    assert figs["hbm_copy_gbps"].verdict == "B slower" and figs["hbm_copy_gbps"].ratio == pytest.approx(0.96, 0.01)
    assert figs["gemm_bf16_tflops"].verdict == "same"


def test_an_unknown_node_is_named_with_the_ones_there_are() -> None:
    with pytest.raises(ConfigError, match="node 'c' is not in the store") as e:
        compare_nodes([synth.acceptance("a", 1), synth.acceptance("b", 1)], "a", "c")
    assert e.value.hint == "nodes with an acceptance: a, b"
