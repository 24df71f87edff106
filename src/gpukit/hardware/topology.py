"""GPU↔GPU topology as ``nvidia-smi topo -m`` shows it (NVLink count or PCIe path), peer access, and GPU↔NUMA.

Path legend (nvidia-smi's): ``X`` self, ``NV#`` # NVLinks, ``PIX`` one PCIe bridge, ``PXB`` several PCIe bridges,
``PHB`` through a PCIe host bridge, ``NODE`` across host bridges within a NUMA node, ``SYS`` across NUMA nodes (SMP
interconnect). Unknown pairs are ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpukit.hardware import _nvml
from gpukit.hardware.gpu import GpuInfo

__all__ = ["LEGEND", "Topology", "nvlink_counts", "read_topology"]

LEGEND = {
    "X": "self",
    "NV#": "connected by # NVLinks",
    "PIX": "at most one PCIe bridge",
    "PXB": "multiple PCIe bridges, no host bridge",
    "PHB": "through a PCIe host bridge (CPU)",
    "NODE": "across PCIe host bridges within one NUMA node",
    "SYS": "across NUMA nodes (SMP interconnect such as QPI/UPI/xGMI)",
}

# nvmlGpuTopologyLevel_t → nvidia-smi label.
_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


@dataclass(frozen=True)
class Topology:
    gpu_indices: tuple[int, ...] = ()
    matrix: tuple[tuple[str | None, ...], ...] = ()  # matrix[i][j]: "X", "NV18", "PIX", ... or None
    peer_access: tuple[tuple[bool | None, ...], ...] = ()  # P2P read capability i → j
    numa_affinity: dict[int, int | None] = field(default_factory=dict)  # gpu index → NUMA node

    def to_dict(self) -> dict[str, object]:
        return {
            "gpu_indices": list(self.gpu_indices),
            "matrix": [list(r) for r in self.matrix],
            "peer_access": [list(r) for r in self.peer_access],
            "numa_affinity": {str(k): v for k, v in self.numa_affinity.items()},
            "legend": LEGEND,
        }


def nvlink_counts(gpus: tuple[GpuInfo, ...]) -> dict[tuple[int, int], int]:
    """Active NVLinks between each pair of GPUs.

    Direct links are matched by the remote end's PCI bus id. On NVSwitch boards (HGX) every link ends at a switch;
    two GPUs that both reach the switches talk over min(their active switch links), which is what
    ``nvidia-smi topo -m`` prints (NV18 on an HGX H100/H200).
    """
    by_bus = {(g.pci_bus_id or "").lower(): g.index for g in gpus if g.pci_bus_id}
    counts: dict[tuple[int, int], int] = {}
    to_switch: dict[int, int] = {}
    for g in gpus:
        for link in g.nvlinks:
            if not link.active:
                continue
            if link.remote_type == "switch":
                to_switch[g.index] = to_switch.get(g.index, 0) + 1
                continue
            peer = by_bus.get((link.remote_pci_bus_id or "").lower())
            if peer is not None and peer != g.index:
                counts[(g.index, peer)] = counts.get((g.index, peer), 0) + 1
    for a, na in to_switch.items():
        for b, nb in to_switch.items():
            if a != b:
                counts[(a, b)] = counts.get((a, b), 0) + min(na, nb)
    return counts


def _pcie_path(nv: Any, a: Any, b: Any) -> str | None:
    level = _nvml.call(nv.nvmlDeviceGetTopologyCommonAncestor, a, b)
    return _LEVELS.get(int(level)) if level is not None else None


def _p2p(nv: Any, a: Any, b: Any) -> bool | None:
    index = getattr(nv, "NVML_P2P_CAPS_INDEX_READ", None)
    if index is None:
        return None
    status = _nvml.call(nv.nvmlDeviceGetP2PStatus, a, b, index)
    return None if status is None else status == getattr(nv, "NVML_P2P_STATUS_OK", 0)


def read_topology(gpus: tuple[GpuInfo, ...]) -> Topology:
    """The matrix for the GPUs NVML sees; an empty Topology without NVML or GPUs. Never raises."""
    affinity = {g.index: g.numa_node for g in gpus}
    nv = _nvml.module()
    if nv is None or not gpus:
        return Topology(gpu_indices=tuple(g.index for g in gpus), numa_affinity=affinity)
    handles = {g.index: _nvml.handle(g.index) for g in gpus}
    links = nvlink_counts(gpus)
    matrix, peers = [], []
    for a in gpus:
        row: list[str | None] = []
        prow: list[bool | None] = []
        for b in gpus:
            ha, hb = handles[a.index], handles[b.index]
            if a.index == b.index:
                row.append("X")
                prow.append(None)
                continue
            n = links.get((a.index, b.index))
            row.append(f"NV{n}" if n else (_pcie_path(nv, ha, hb) if ha is not None and hb is not None else None))
            prow.append(_p2p(nv, ha, hb) if ha is not None and hb is not None else None)
        matrix.append(tuple(row))
        peers.append(tuple(prow))
    return Topology(
        gpu_indices=tuple(g.index for g in gpus),
        matrix=tuple(matrix),
        peer_access=tuple(peers),
        numa_affinity=affinity,
    )
