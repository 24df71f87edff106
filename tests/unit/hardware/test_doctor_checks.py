"""Every doctor check driven through hand-built Facts (the fake hardware layer), flipping from PASS to WARN/FAIL."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpukit.hardware.checks import (
    CHECKS,
    check_cuda_visible_devices,
    check_cupy_cuda,
    check_driver,
    check_ecc,
    check_frameworks,
    check_nvcc,
    check_nvml,
    check_pcie,
    check_processes,
    check_throttling,
    check_toolkit_paths,
    check_torch_build,
    check_torch_cuda_runtime,
    parse_version,
    visible_gpu_count,
)
from gpukit.hardware.doctor import run_checks
from gpukit.hardware.facts import Facts
from gpukit.hardware.gpu import GpuInfo, GpuProcess, PciDevice
from gpukit.hardware.stack import FrameworkProbe

PCI = (PciDevice("0000:19:00.0", "0x2335", "0x030200", "nvidia", 0),)


def gpu(index: int = 0, **kw) -> GpuInfo:
    base = dict(
        uuid=f"GPU-aaaa-{index}",
        utilization_pct=0,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        ecc_enabled=True,
        ecc_uncorrected_volatile=0,
        ecc_uncorrected_aggregate=0,
        throttle_reasons=("gpu_idle",),
        temperature_c=40,
        power_w=100.0,
        power_limit_w=700.0,
    )
    base.update(kw)
    return GpuInfo(index=index, name="NVIDIA H200", **base)  # type: ignore[arg-type]


def torch_probe(**kw) -> FrameworkProbe:
    base = dict(
        name="torch",
        installed=True,
        version="2.11.0",
        distribution="torch",
        probed=True,
        importable=True,
        sees_gpu=True,
        device_count=1,
        details={"build": "cuda", "cuda_runtime": "12.8"},
    )
    base.update(kw)
    return FrameworkProbe(**base)  # type: ignore[arg-type]


def numba_probe(**kw) -> FrameworkProbe:
    base = dict(
        name="numba",
        installed=True,
        version="0.61.2",
        distribution="numba",
        probed=True,
        importable=True,
        sees_gpu=True,
        device_count=1,
        numpy_version="2.4.6",
        details={"numba_cuda": "0.30.4"},
    )
    base.update(kw)
    return FrameworkProbe(**base)  # type: ignore[arg-type]


@pytest.fixture
def healthy() -> Facts:
    """An H200 box where everything is right."""
    return Facts(
        pci_devices=PCI,
        kernel_module_loaded=True,
        nvml_ok=True,
        driver_version="570.86.15",
        cuda_driver_version="12.8",
        gpus=(gpu(0),),
        frameworks=(torch_probe(), numba_probe()),
        nvcc_path="/usr/local/cuda-12.8/bin/nvcc",
        nvcc_version="12.8",
        cuda_toolkits=("/usr/local/cuda", "/usr/local/cuda-12.8"),
        ld_library_path="/usr/local/cuda-12.8/lib64",
    )


def levels(findings) -> list[str]:
    return [f.level for f in findings]


def test_healthy_machine_has_no_fail_or_warn(healthy):
    report = run_checks(healthy)
    bad = [f for f in report.findings if f.level in ("WARN", "FAIL")]
    assert bad == [] and not report.failed
    assert {f.check for f in report.findings} >= {"driver", "nvml", "framework:torch", "framework:numba", "ecc"}


def test_every_non_pass_finding_has_a_hint(healthy):
    broken = replace(
        healthy,
        kernel_module_loaded=False,
        nvml_ok=False,
        nvml_error="NVMLError_DriverNotLoaded",
        cuda_visible_devices="",
        gpus=(gpu(0, ecc_uncorrected_volatile=2, throttle_reasons=("hw_thermal_slowdown",)),),
    )
    for f in run_checks(broken).findings:
        if f.level in ("WARN", "FAIL"):
            assert f.hint, f


def test_driver_missing_with_device_on_bus(healthy):
    assert levels(check_driver(healthy)) == ["PASS"]
    f = check_driver(replace(healthy, kernel_module_loaded=False, nvml_ok=False, gpus=()))[0]
    assert f.level == "FAIL" and "0000:19:00.0" in f.message and "driver" in (f.hint or "")
    assert levels(check_driver(Facts())) == ["SKIP"]


def test_nvml_failing_with_driver_loaded(healthy):
    assert levels(check_nvml(healthy)) == ["PASS"]
    f = check_nvml(replace(healthy, nvml_ok=False, gpus=(), nvml_error="NVMLError_LibRmVersionMismatch: Mismatch"))[0]
    assert f.level == "FAIL" and "Mismatch" in f.message and "reboot" in (f.hint or "")
    assert levels(check_nvml(Facts())) == ["SKIP"]


def test_nvml_package_missing_hints_the_install(healthy):
    error = "nvidia-ml-py is not installed (No module named 'pynvml')"
    f = check_nvml(replace(healthy, nvml_ok=False, gpus=(), nvml_error=error))[0]
    assert f.level == "FAIL" and "pip install nvidia-ml-py" in (f.hint or "")


def test_cpu_only_torch_on_gpu_machine(healthy):
    assert levels(check_torch_build(healthy)) == ["PASS"]
    cpu_torch = torch_probe(details={"build": "cpu", "cuda_runtime": None}, sees_gpu=False)
    f = check_torch_build(replace(healthy, frameworks=(cpu_torch,)))[0]
    assert f.level == "FAIL" and "CPU-only" in f.message and "whl/cu128" in (f.hint or "")
    # without a GPU a CPU build is fine
    assert levels(check_torch_build(Facts(frameworks=(cpu_torch,)))) == ["PASS"]
    assert levels(check_torch_build(Facts())) == ["SKIP"]


def test_torch_runtime_newer_than_driver(healthy):
    assert levels(check_torch_cuda_runtime(healthy)) == ["PASS"]
    new_major = torch_probe(details={"build": "cuda", "cuda_runtime": "13.0"})
    f = check_torch_cuda_runtime(replace(healthy, frameworks=(new_major,)))[0]
    assert f.level == "FAIL" and "13.0" in f.message and "12.8" in f.message
    new_minor = torch_probe(details={"build": "cuda", "cuda_runtime": "12.9"})
    assert levels(check_torch_cuda_runtime(replace(healthy, frameworks=(new_minor,)))) == ["WARN"]


def test_numba_cuda_numpy_clash_names_both_versions(healthy):
    broken = numba_probe(
        importable=False,
        sees_gpu=None,
        numpy_version="2.5.2",
        error="AttributeError: module 'numpy' has no attribute 'row_stack'",
        culprit={
            "file": "/venv/site-packages/numba_cuda/numba/cuda/cudadrv/devicearray.py",
            "line": 27,
            "code": "np.row_stack",
            "module": "numba_cuda",
            "distribution": "numba-cuda",
            "distribution_version": "0.30.4",
        },
    )
    findings = check_frameworks(replace(healthy, frameworks=(torch_probe(), broken)))
    assert levels(findings) == ["PASS", "FAIL"]
    f = findings[1]
    assert f.check == "framework:numba"
    assert "numba-cuda 0.30.4" in f.message and "numpy 2.5.2" in f.message and "row_stack" in f.message
    assert 'pip install "numpy<2.5"' in (f.hint or "")


def test_numpy_clash_found_from_numpy_removal_message_without_culprit(healthy):
    broken = numba_probe(
        importable=False,
        numpy_version="2.5.0",
        error="AttributeError: `np.row_stack` was removed in the NumPy 2.5 release. Use `np.vstack` instead.",
    )
    f = check_frameworks(replace(healthy, frameworks=(broken,)))[0]
    assert f.level == "FAIL" and "numba-cuda 0.30.4" in f.message and "numpy 2.5.0" in f.message


def test_framework_import_error_timeout_and_blind(healthy):
    generic = torch_probe(importable=False, error="ImportError: libcudnn.so.9: cannot open shared object file")
    f = check_frameworks(replace(healthy, frameworks=(generic,)))[0]
    assert f.level == "FAIL" and "libcudnn.so.9" in f.message and "LD_LIBRARY_PATH" in (f.hint or "")
    hung = torch_probe(importable=False, timed_out=True, error="import did not finish within 60 s")
    assert levels(check_frameworks(replace(healthy, frameworks=(hung,)))) == ["FAIL"]
    blind = torch_probe(sees_gpu=False, device_count=0, details={"build": "cuda", "gpu_error": "CUDA driver error"})
    f = check_frameworks(replace(healthy, frameworks=(blind,)))[0]
    assert f.level == "FAIL" and "sees no GPU" in f.message and "CUDA driver error" in f.message
    # the same framework on a machine with no GPU is fine
    assert levels(check_frameworks(Facts(frameworks=(blind,)))) == ["PASS"]
    assert levels(check_frameworks(Facts())) == ["SKIP"]


def cupy(dist: str) -> FrameworkProbe:
    return FrameworkProbe(
        name="cupy",
        installed=True,
        version="14.2.0",
        distribution=dist,
        probed=True,
        importable=True,
        sees_gpu=True,
        device_count=1,
    )


def test_cupy_cuda_major_vs_driver(healthy):
    assert levels(check_cupy_cuda(replace(healthy, frameworks=(cupy("cupy-cuda12x"),)))) == ["PASS"]
    f = check_cupy_cuda(replace(healthy, frameworks=(cupy("cupy-cuda13x"),)))[0]
    assert f.level == "FAIL" and "CUDA 13" in f.message and "cupy-cuda12x" in (f.hint or "")
    assert levels(check_cupy_cuda(healthy)) == ["SKIP"]


def test_nvcc_vs_runtime_and_driver(healthy):
    assert levels(check_nvcc(healthy)) == ["PASS"]
    f = check_nvcc(replace(healthy, nvcc_version="11.8", nvcc_path="/usr/bin/nvcc"))[0]
    assert (
        f.level == "WARN" and "11.8" in f.message and "/usr/local/cuda-12.8/bin" in (f.hint or "")
    )  # the matching toolkit
    newer = replace(healthy, nvcc_version="12.9", cuda_toolkits=("/usr/local/cuda-12.9",))
    assert levels(check_nvcc(newer)) == ["WARN"]
    assert levels(check_nvcc(replace(healthy, nvcc_path=None))) == ["SKIP"]


def test_toolkit_installed_but_not_on_paths(healthy):
    assert levels(check_toolkit_paths(healthy)) == ["PASS"]
    f = check_toolkit_paths(replace(healthy, nvcc_path=None, nvcc_version=None))[0]
    assert f.level == "WARN"
    assert 'export PATH="/usr/local/cuda-12.8/bin:$PATH"' in (f.hint or "")
    assert 'LD_LIBRARY_PATH="/usr/local/cuda-12.8/lib64' in (f.hint or "")
    assert levels(check_toolkit_paths(replace(healthy, ld_library_path=None))) == ["WARN"]
    registered = replace(healthy, ld_library_path=None, ld_so_conf_paths=("/usr/local/cuda/targets/x86_64-linux/lib",))
    assert levels(check_toolkit_paths(registered)) == ["PASS"]
    assert levels(check_toolkit_paths(replace(healthy, cuda_toolkits=()))) == ["SKIP"]


def test_cuda_visible_devices(healthy):
    two = replace(healthy, gpus=(gpu(0), gpu(1)))
    assert levels(check_cuda_visible_devices(two)) == ["PASS"]
    assert levels(check_cuda_visible_devices(replace(two, cuda_visible_devices="0,1"))) == ["PASS"]
    assert levels(check_cuda_visible_devices(replace(two, cuda_visible_devices="1"))) == ["WARN"]
    f = check_cuda_visible_devices(replace(two, cuda_visible_devices=""))[0]
    assert f.level == "FAIL" and "hides all 2" in f.message
    assert levels(check_cuda_visible_devices(replace(two, cuda_visible_devices="-1"))) == ["FAIL"]


def test_visible_gpu_count_follows_cuda_rules():
    gpus = (gpu(0), gpu(1))
    assert visible_gpu_count("0,1", gpus) == 2
    assert visible_gpu_count("1,7,0", gpus) == 1  # CUDA stops at the first invalid entry
    assert visible_gpu_count("GPU-aaaa-1", gpus) == 1
    assert visible_gpu_count("GPU-zzzz", gpus) == 0


def test_pcie_downtrained_only_matters_when_busy(healthy):
    assert levels(check_pcie(healthy)) == ["PASS"]
    idle = replace(healthy, gpus=(gpu(0, pcie_gen_current=1, utilization_pct=0),))
    f = check_pcie(idle)[0]
    assert f.level == "PASS" and "idle" in f.message
    busy = replace(healthy, gpus=(gpu(0, pcie_gen_current=3, pcie_width_current=8, utilization_pct=97),))
    f = check_pcie(busy)[0]
    assert f.level == "WARN" and "Gen3 x8" in f.message and "97 %" in f.message
    assert levels(check_pcie(replace(healthy, gpus=(gpu(0, pcie_gen_current=None),)))) == ["SKIP"]


def test_throttling(healthy):
    assert levels(check_throttling(healthy)) == ["PASS"]
    hot = replace(healthy, gpus=(gpu(0, throttle_reasons=("hw_thermal_slowdown",), temperature_c=91),))
    f = check_throttling(hot)[0]
    assert f.level == "FAIL" and "hw_thermal_slowdown" in f.message and "91" in f.message
    capped = replace(healthy, gpus=(gpu(0, throttle_reasons=("sw_power_cap",), power_w=699.0),))
    assert levels(check_throttling(capped)) == ["WARN"]


def test_ecc(healthy):
    assert levels(check_ecc(healthy)) == ["PASS"]
    f = check_ecc(replace(healthy, gpus=(gpu(0, ecc_uncorrected_volatile=4),)))[0]
    assert f.level == "FAIL" and "4 uncorrectable" in f.message
    assert levels(check_ecc(replace(healthy, gpus=(gpu(0, ecc_uncorrected_aggregate=1),)))) == ["WARN"]
    assert levels(check_ecc(replace(healthy, gpus=(gpu(0, ecc_enabled=None),)))) == ["SKIP"]


def test_other_processes_holding_memory(healthy):
    assert levels(check_processes(healthy)) == ["PASS"]
    other = GpuProcess(pid=999, name="python", used_memory_bytes=40 * 2**30, kind="compute")
    f = check_processes(replace(healthy, gpus=(gpu(0, processes=(other,)),)))[0]
    assert f.level == "WARN" and "40.0 GiB" in f.message and "pid 999" in f.message
    own = replace(healthy, gpus=(gpu(0, processes=(other,)),), own_pids=frozenset({999}))
    assert levels(check_processes(own)) == ["PASS"]


def test_no_gpu_machine_is_all_pass_or_skip():
    report = run_checks(Facts(frameworks=(torch_probe(sees_gpu=False, device_count=0),)))
    assert set(levels(report.findings)) <= {"PASS", "SKIP"} and not report.failed


def test_a_crashing_check_becomes_a_fail_finding(healthy, monkeypatch):
    import gpukit.hardware.doctor as doctor_mod

    def boom(_facts):
        raise RuntimeError("bug")

    monkeypatch.setattr(doctor_mod, "CHECKS", (("boom", boom), *CHECKS))
    report = doctor_mod.run_checks(healthy)
    assert report.findings[0].check == "boom" and report.findings[0].level == "FAIL"
    assert report.failed and len(report.findings) > 1


def test_parse_version():
    assert parse_version("12.8") == (12, 8)
    assert parse_version("2.5.2rc1") == (2, 5, 2)
    assert parse_version("2.11.0+cu128") == (2, 11, 0)
    assert parse_version(None) is None and parse_version("n/a") is None


def test_long_import_errors_are_cut_in_the_message_not_mislabelled(healthy):
    numpy_broken = "ImportError: \n\nIMPORTANT: PLEASE READ THIS " + "x" * 2000 + " _multiarray_umath.cpython-312.so"
    p = numba_probe(importable=False, error=numpy_broken)
    f = check_frameworks(replace(healthy, frameworks=(p,)))[0]
    assert f.level == "FAIL" and len(f.message) < 500 and "cannot be imported" in f.message
    assert "CUDA library" not in f.message  # a .so that is not a CUDA library
