"""The NVML readers against a fake 2 x H200 NVML: every field lands where the JSON schema says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpukit.hardware import _nvml, machine_fingerprint, telemetry
from gpukit.hardware.gpu import (
    cuda_version_string,
    nvidia_pci_devices,
    read_driver,
    read_gpus,
    sysfs_bus_id,
)
from gpukit.hardware.topology import nvlink_counts, read_topology


def test_read_gpus_fills_every_field(fake_nvml):
    fake_nvml.gpus[1].processes = [(4242, 2 * 2**30)]
    fake_nvml.process_names[4242] = "train.py"
    gpus, reason = read_gpus()
    assert reason is None and len(gpus) == 2
    g = gpus[0]
    assert g.name == "NVIDIA H200" and g.uuid == "GPU-0000" and g.pci_bus_id == "00000000:19:00.0"
    assert g.compute_capability == "9.0"
    assert g.sm_count == 132  # 16896 cores / 128 per SM on cc 9.0 (nvmlDeviceGetAttributes is MIG-only)
    assert g.memory_total_bytes == 150_754_820_096 and g.memory_free_bytes == 150_754_820_096 - 1_000_000_000
    assert (g.sm_clock_mhz, g.sm_clock_max_mhz, g.mem_clock_mhz) == (1980, 1980, 3201)
    assert g.power_w == 120.0 and g.power_limit_w == 700.0
    assert (g.pcie_gen_current, g.pcie_width_max) == (5, 16)
    assert len(g.nvlinks) == 18 and all(n.active and n.remote_type == "switch" for n in g.nvlinks)
    assert g.ecc_enabled is True and g.ecc_corrected_volatile == 3 and g.ecc_uncorrected_volatile == 0
    assert g.throttle_reasons == ("gpu_idle",)
    assert g.mig_enabled is False
    assert gpus[1].processes[0].pid == 4242 and gpus[1].processes[0].name == "train.py"
    assert gpus[1].processes[0].used_memory_bytes == 2 * 2**30


def test_unsupported_fields_are_none_not_crashes(fake_nvml):
    def unsupported(*_a):
        raise fake_nvml.NVMLError("Not Supported")

    fake_nvml.nvmlDeviceGetPowerUsage = unsupported
    fake_nvml.nvmlDeviceGetEccMode = unsupported
    fake_nvml.nvmlDeviceGetNvLinkState = unsupported
    gpus, _ = read_gpus()
    assert gpus[0].power_w is None and gpus[0].ecc_enabled is None and gpus[0].nvlinks == ()
    assert gpus[0].to_dict()["power_w"] is None


def test_driver_and_cuda_version(fake_nvml):
    assert read_driver() == ("570.86.15", "12.8")
    assert cuda_version_string(13000) == "13.0" and cuda_version_string(None) is None


def test_no_nvml_gives_empty_list_with_reason(no_nvml):
    gpus, reason = read_gpus()
    assert gpus == ()
    assert reason is not None and "NVML" in reason
    assert telemetry.sample(0) is None and telemetry.nvml_available() is False


def test_missing_nvml_package_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml → ImportError
    _nvml.reset()
    try:
        assert _nvml.module() is None
        assert "pip install nvidia-ml-py" in (_nvml.init_error() or "")
    finally:
        _nvml.reset()


def test_telemetry_sample(fake_nvml):
    fake_nvml.gpus[0].throttle_mask = 0x4 | 0x40
    s = telemetry.sample(0)
    assert s is not None
    assert s.throttle_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert s.energy_j == 5000.0 and s.power_w == 120.0 and s.temperature_c == 34
    assert s.to_dict()["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"]
    fake_nvml.gpus[0].energy_mj = None
    assert telemetry.sample(0).energy_j is None  # type: ignore[union-attr]
    assert telemetry.sample(7) is None  # no such device
    assert telemetry.nvml_available() is True


def test_decode_throttle():
    assert _nvml.decode_throttle(0) == () and _nvml.decode_throttle(None) == ()
    assert _nvml.decode_throttle(0x1 | 0x20) == ("gpu_idle", "sw_thermal_slowdown")


def test_topology_nvswitch_board_is_nv18(fake_nvml):
    gpus, _ = read_gpus()
    topo = read_topology(gpus)
    assert topo.matrix == (("X", "NV18"), ("NV18", "X"))
    assert topo.peer_access == ((None, True), (True, None))


def test_topology_pcie_only_uses_common_ancestor(fake_nvml):
    for g in fake_nvml.gpus:
        g.nvlink_states = []
    gpus, _ = read_gpus()
    assert read_topology(gpus).matrix == (("X", "SYS"), ("SYS", "X"))


def test_direct_nvlinks_counted_by_remote_bus_id():
    from gpukit.hardware.gpu import GpuInfo, NvLink

    a = GpuInfo(0, "A100", pci_bus_id="00000000:01:00.0", nvlinks=(NvLink(0, True, "00000000:02:00.0", 3, "gpu"),) * 4)
    b = GpuInfo(1, "A100", pci_bus_id="00000000:02:00.0", nvlinks=(NvLink(0, False, "00000000:01:00.0", 3, "gpu"),))
    assert nvlink_counts((a, b)) == {(0, 1): 4}


def test_pci_scan_finds_nvidia_display_devices(tmp_path: Path):
    def dev(name: str, vendor: str, klass: str) -> None:
        d = tmp_path / name
        d.mkdir()
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(klass + "\n")
        (d / "device").write_text("0x2335\n")
        (d / "numa_node").write_text("1\n")

    dev("0000:19:00.0", "0x10de", "0x030200")  # NVIDIA 3D controller
    dev("0000:1a:00.0", "0x10de", "0x068000")  # NVIDIA NVSwitch bridge: not a GPU
    dev("0000:00:02.0", "0x8086", "0x030000")  # Intel VGA
    found = nvidia_pci_devices(tmp_path)
    assert [p.address for p in found] == ["0000:19:00.0"]
    assert found[0].driver is None and found[0].numa_node == 1


def test_sysfs_bus_id():
    assert sysfs_bus_id("00000000:9B:00.0") == "0000:9b:00.0"


def test_fingerprint_with_gpus(fake_nvml):
    fp = machine_fingerprint()
    assert fp["gpu_count"] == 2 and fp["gpu_names"] == ["NVIDIA H200", "NVIDIA H200"]
    assert fp["driver_version"] == "570.86.15"
    assert isinstance(fp["cpu_cores"], int) and fp["python"]


def test_fingerprint_without_gpus(no_nvml):
    fp = machine_fingerprint()
    assert fp["gpu_count"] == 0 and fp["driver_version"] is None


def test_package_exports_the_functions_even_after_the_submodule_is_imported():
    import gpukit.hardware
    import gpukit.hardware.inventory
    from gpukit.hardware import inventory as inv_fn

    assert callable(inv_fn) and callable(gpukit.hardware.machine_fingerprint)
    assert gpukit.hardware.__all__ == sorted(gpukit.hardware.__all__)
