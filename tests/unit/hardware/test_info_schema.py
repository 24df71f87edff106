"""The `gpukit info --json` and `gpukit doctor --json` documents: keys and types as docs/json-schemas.md says."""

from __future__ import annotations

import json

from gpukit.hardware import inventory
from gpukit.hardware.doctor import run_checks
from gpukit.hardware.facts import Facts, Finding

TOP = {
    "schema_version": int,
    "hostname": str,
    "cpu": dict,
    "gpus": list,
    "topology": dict,
    "stack": dict,
    "nvidia": dict,
}
CPU = {
    "model": (str, type(None)),
    "cores": int,
    "threads": int,
    "extensions": list,
    "numa_nodes": list,
    "memory_total_bytes": int,
    "memory_available_bytes": int,
    "sockets": (int, type(None)),
}
GPU_KEYS = {
    "index",
    "name",
    "source",
    "uuid",
    "pci_bus_id",
    "compute_capability",
    "sm_count",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_free_bytes",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "mem_clock_mhz",
    "mem_clock_max_mhz",
    "power_w",
    "power_limit_w",
    "temperature_c",
    "utilization_pct",
    "mem_utilization_pct",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "nvlinks",
    "ecc_enabled",
    "ecc_uncorrected_volatile",
    "ecc_corrected_volatile",
    "ecc_uncorrected_aggregate",
    "throttle_reasons",
    "mig_enabled",
    "processes",
    "numa_node",
    "datasheet",
}
FRAMEWORK_KEYS = {
    "name",
    "installed",
    "version",
    "distribution",
    "probed",
    "importable",
    "sees_gpu",
    "device_count",
    "failed_stage",
    "kernel_ok",
    "error",
    "culprit",
    "numpy_version",
    "timed_out",
    "seconds",
    "details",
}


def check_types(doc: dict, spec: dict) -> None:
    for key, typ in spec.items():
        assert key in doc, key
        assert isinstance(doc[key], typ), (key, doc[key])


def test_info_document_without_gpu(no_nvml):
    doc = json.loads(json.dumps(inventory(probe_frameworks=False).to_dict()))
    check_types(doc, TOP)
    assert doc["schema_version"] == 1
    check_types(doc["cpu"], CPU)
    assert doc["gpus"] == [] and isinstance(doc["gpus_reason"], str) and doc["gpus_reason"]
    assert set(doc["topology"]) >= {"gpu_indices", "matrix", "peer_access", "numa_affinity", "legend"}
    s = doc["stack"]
    assert {"os", "kernel", "python", "driver_version", "cuda_driver_version", "nvcc_path", "frameworks"} <= set(s)
    assert set(s["frameworks"]) == {"torch", "numba", "cupy", "triton", "jax", "tensorflow", "paddle", "mxnet"}
    for fw in s["frameworks"].values():
        assert set(fw) == FRAMEWORK_KEYS
        assert fw["probed"] is False  # probe_frameworks=False never starts a child
    assert doc["nvidia"]["nvml_ok"] is False


def test_info_document_with_fake_gpus(fake_nvml):
    doc = json.loads(json.dumps(inventory(probe_frameworks=False).to_dict()))
    assert doc["gpus_reason"] is None and len(doc["gpus"]) == 2
    g = doc["gpus"][0]
    assert set(g) == GPU_KEYS
    assert isinstance(g["throttle_reasons"], list) and isinstance(g["nvlinks"], list)
    assert g["datasheet"]["key"] == "h200-sxm" and g["datasheet"]["bandwidth_gbps"] > 0  # labelled "datasheet"
    assert doc["topology"]["matrix"] == [["X", "NV18"], ["NV18", "X"]]
    assert doc["stack"]["driver_version"] == "570.86.15" and doc["stack"]["cuda_driver_version"] == "12.8"


def test_doctor_document():
    report = run_checks(Facts())
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["schema_version"] == 1 and doc["ok"] is True
    assert set(doc["counts"]) == {"PASS", "WARN", "FAIL", "SKIP"}
    assert sum(doc["counts"].values()) == len(doc["findings"]) > 0
    for f in doc["findings"]:
        assert set(f) == {"check", "level", "message", "hint"}
        assert f["level"] in {"PASS", "WARN", "FAIL", "SKIP"}
        assert isinstance(f["check"], str) and isinstance(f["message"], str)
        assert f["hint"] is None or isinstance(f["hint"], str)
    assert Finding("x", "FAIL", "m", "h").to_dict() == {"check": "x", "level": "FAIL", "message": "m", "hint": "h"}
