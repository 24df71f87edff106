"""NVML health around an acceptance run: what is read, what counts as damage, and the sampler at ≥ 1 Hz with the
XID events it records."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from accept_fakes import AcceptNvml, h200s

from gpukit.fleet.telemetry import Sampler, health, health_faults, nvml_index_of_uuid
from gpukit.hardware import _nvml


@pytest.fixture
def nvml() -> Iterator[AcceptNvml]:
    fake = AcceptNvml(h200s(2))
    _nvml.use(fake)
    yield fake
    _nvml.reset()


def test_health_reads_ecc_repairs_power_and_clocks(nvml: AcceptNvml) -> None:
    nvml.retired[1] = (2, 1)
    nvml.remapped[1] = (5, 1, 0, 0)
    h = health(1)
    assert h.reachable and h.uuid == "GPU-0001" and h.name == "NVIDIA H200" and h.serial == "1324590001"
    assert (h.power_limit_w, h.sm_clock_max_mhz, h.app_sm_clock_mhz) == (700.0, 1980, 1980)
    assert (h.retired_pages_sbe, h.retired_pages_dbe) == (2, 1)
    assert (h.remapped_rows_correctable, h.remapped_rows_uncorrectable) == (5, 1)
    assert h.ecc_enabled and h.ecc_corrected_volatile == 3 and h.ecc_uncorrected_volatile == 0
    assert (h.pcie_gen, h.pcie_width) == (5, 16)
    assert nvml_index_of_uuid("GPU-0001") == 1 and nvml_index_of_uuid("0000") == 0 and nvml_index_of_uuid("x") is None


def test_health_faults_name_what_changed_during_the_run(nvml: AcceptNvml) -> None:
    before = health(0)
    assert health_faults(before, health(0)) == []
    nvml.gpus[0].ecc_uncorrected_volatile = 2
    nvml.retired[0] = (0, 1)
    nvml.remapped[0] = (0, 1, 1, 0)
    faults = health_faults(before, health(0), [{"t_s": 12.5, "index": 0, "xid": 48}, {"t_s": 1, "xid": 13}])
    assert any("2 new uncorrectable ECC" in f for f in faults)
    assert any("1 page(s) retired for double-bit" in f for f in faults)
    assert any("row(s) remapped for uncorrectable" in f for f in faults)
    assert any("row remapping is pending" in f for f in faults)
    assert any(f == "XID 48 raised at t = 12.5 s" for f in faults)
    assert not any("XID 13" in f for f in faults)  # an application's own error (XID 13) is not the GPU's fault


def test_a_gpu_that_falls_off_the_bus_reads_unreachable(nvml: AcceptNvml) -> None:
    before = health(1)
    nvml.lost.add(1)
    after = health(1)
    assert not after.reachable and after.uuid is None
    (fault,) = health_faults(before, after)
    assert "stopped answering NVML" in fault and "XID 79" in fault


def test_sampler_samples_every_gpu_at_least_once_a_second_and_records_xids(nvml: AcceptNvml) -> None:
    nvml.gpus[1].throttle_mask = 0x4  # sw_power_cap
    nvml.pending_xids.append((1, 79))
    with Sampler([0, 1], interval_s=0.1) as sampler:
        time.sleep(0.65)
    got = sampler.samples_of(1)
    assert len(got) >= 4 and all(s["throttle_reasons"] == ["sw_power_cap"] for s in got)
    gaps = [b["t_s"] - a["t_s"] for a, b in itertools.pairwise(got)]
    assert max(gaps) < 1.0  # ≥ 1 Hz
    assert got[0]["sm_clock_mhz"] == 1980 and got[0]["power_w"] == 120.0
    assert [(x["index"], x["xid"]) for x in sampler.xids] == [(1, 79)]
    assert sampler.samples_of(0, 0.0, 0.05) == [s for s in sampler.samples_of(0) if s["t_s"] <= 0.05]


def test_without_nvml_health_is_unreachable_and_the_sampler_is_empty() -> None:
    _nvml.use(None, "NVML did not initialise")
    try:
        assert not health(0).reachable
        with Sampler([0], interval_s=0.05) as sampler:
            time.sleep(0.12)
        assert sampler.samples == [] and sampler.xids == []
    finally:
        _nvml.reset()
