"""Node identity from a fake NVML (2 x H200 with serials) and without NVML; the node name's order; what changed."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from fake_nvml import FakeNvml

from gpukit.errors import ConfigError
from gpukit.hardware import _nvml
from gpukit.hardware.identity import identity_changes, node_identity, node_name, stack_key


class SerialNvml(FakeNvml):
    def nvmlDeviceGetSerial(self, h: int) -> str:
        return f"165522000{h}"


def test_identity_from_nvml(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUKIT_NODE", raising=False)
    _nvml.use(SerialNvml())
    ident = node_identity()
    assert ident["name"] == ident["hostname"] == socket.gethostname()
    assert (ident["driver"], ident["cuda"]) == ("570.86.15", "12.8")
    assert [(g["index"], g["uuid"], g["serial"], g["name"]) for g in ident["gpus"]] == [
        (0, "GPU-0000", "1655220000", "NVIDIA H200"),
        (1, "GPU-0001", "1655220001", "NVIDIA H200"),
    ]
    assert ident["gpus"][1]["pci_bus_id"] == "00000000:2A:00.0"
    assert ident["stack"]["gpukit"] and ident["stack"]["python"]
    assert ident["stack_key"].startswith("drv570.86.15 cuda12.8 torch") and ident["stack_key"].endswith("gpukit0.1")


def test_identity_without_nvml_and_without_serials(no_nvml: None, fake_nvml: FakeNvml) -> None:
    _nvml.use(None, "no NVML")
    ident = node_identity("rack3-n07")
    assert (ident["name"], ident["gpus"], ident["driver"], ident["cuda"]) == ("rack3-n07", [], None, None)
    assert ident["stack_key"].startswith("drv- cuda- ")
    _nvml.use(FakeNvml())  # an NVML without nvmlDeviceGetSerial: the serial is unknown, not an error
    assert [g["serial"] for g in node_identity("x")["gpus"]] == [None, None]


def test_node_name_order_and_bad_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUKIT_NODE", "k8s-node-12")
    assert node_name() == "k8s-node-12" and node_name("given") == "given"
    monkeypatch.setenv("GPUKIT_NODE", "")
    assert node_name() == socket.gethostname()
    for bad in ("", "   ", "x" * 201, "a\nb"):
        with pytest.raises(ConfigError, match="bad node name") as info:
            node_name(bad)
        assert info.value.hint and "--node" in info.value.hint


def _ident(*gpus: tuple[int, str], driver: str = "580.1") -> dict[str, Any]:
    stack = {"gpukit": "0.1.0", "torch": "2.11.0"}
    return {"name": "n1", "driver": driver, "cuda": "13.0", "stack": stack,
            "stack_key": stack_key(driver, "13.0", stack),
            "gpus": [{"index": i, "uuid": u, "serial": f"S-{u}"} for i, u in gpus]}  # fmt: skip


def test_identity_changes_names_each_gpu() -> None:
    before = _ident((0, "GPU-a"), (1, "GPU-b"), (2, "GPU-c"))
    assert identity_changes(None, before) == [] and identity_changes(before, before) == []
    after = _ident((0, "GPU-a"), (1, "GPU-c"), (2, "GPU-d"), driver="580.2")
    assert identity_changes(before, after) == [
        "GPU 1 GPU-b (serial S-GPU-b) is gone",
        "GPU 2 GPU-d (serial S-GPU-d) is new",
        "GPU GPU-c (serial S-GPU-c) moved from index 2 to 1",
        "driver 580.1 → 580.2",
        "software stack drv580.1 cuda13.0 torch2.11.0 gpukit0.1 → drv580.2 cuda13.0 torch2.11.0 gpukit0.1",
    ]
