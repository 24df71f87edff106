"""What CPU this is: model, topology, clocks, vector/matrix extensions, memory and NUMA nodes.

Read from /proc/cpuinfo, /sys and psutil; every field that cannot be read here is ``None``.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["EXTENSION_FLAGS", "CpuInfo", "NumaNode", "parse_cpuinfo", "read_cpu"]

# gpukit name → /proc/cpuinfo flag. Order is the display order.
EXTENSION_FLAGS: tuple[tuple[str, str], ...] = (
    ("avx2", "avx2"),
    ("fma", "fma"),
    ("avx512f", "avx512f"),
    ("avx512_bf16", "avx512_bf16"),
    ("avx512_fp16", "avx512_fp16"),
    ("avx512_vnni", "avx512_vnni"),
    ("avx_vnni", "avx_vnni"),
    ("amx_tile", "amx_tile"),
    ("amx_bf16", "amx_bf16"),
    ("amx_int8", "amx_int8"),
    ("amx_fp16", "amx_fp16"),
    ("neon", "asimd"),  # aarch64 (Grace)
    ("sve", "sve"),
)


@dataclass(frozen=True)
class NumaNode:
    node: int
    cpus: str  # kernel cpulist, e.g. "0-31,64-95"
    memory_total_bytes: int | None


@dataclass(frozen=True)
class CpuInfo:
    model: str | None
    vendor: str | None
    architecture: str
    sockets: int | None
    cores: int | None  # physical cores
    threads: int | None  # logical CPUs
    cpus_usable: int | None  # CPUs this process may run on (affinity / cgroup)
    clock_current_mhz: float | None
    clock_max_mhz: float | None
    extensions: tuple[str, ...]  # the EXTENSION_FLAGS names this CPU has
    memory_total_bytes: int | None
    memory_available_bytes: int | None
    numa_nodes: tuple[NumaNode, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["extensions"] = list(self.extensions)
        d["numa_nodes"] = [asdict(n) for n in self.numa_nodes]
        return d


def parse_cpuinfo(text: str) -> dict[str, object]:
    """Model, vendor, socket count, core count and flags from /proc/cpuinfo text (x86 and aarch64 layouts)."""
    model = vendor = None
    flags: set[str] = set()
    sockets: set[str] = set()
    cores: set[tuple[str, str]] = set()
    physical = core = "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in ("model name", "Model") and model is None and value:
            model = value
        elif key in ("vendor_id", "CPU implementer") and vendor is None:
            vendor = value
        elif key in ("flags", "Features"):
            flags.update(value.split())
        elif key == "physical id":
            physical = value
            sockets.add(value)
        elif key == "core id":
            core = value
            cores.add((physical, core))
    return {
        "model": model,
        "vendor": vendor,
        "flags": flags,
        "sockets": len(sockets) or None,
        "cores": len(cores) or None,
    }


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _numa_nodes(root: Path = Path("/sys/devices/system/node")) -> tuple[NumaNode, ...]:
    nodes = []
    for d in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        cpus = (_read(d / "cpulist") or "").strip()
        mem = None
        for line in (_read(d / "meminfo") or "").splitlines():
            if "MemTotal:" in line:  # "Node 0 MemTotal:  263855220 kB"
                mem = int(line.split()[-2]) * 1024
        nodes.append(NumaNode(node=int(d.name[4:]), cpus=cpus, memory_total_bytes=mem))
    return tuple(nodes)


def _max_mhz() -> float | None:
    raw = _read(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
    if raw and raw.strip().isdigit():
        return int(raw.strip()) / 1000.0
    return None


def read_cpu() -> CpuInfo:
    """The CPU of this machine; never raises (unknown fields are None)."""
    import psutil

    parsed = parse_cpuinfo(_read(Path("/proc/cpuinfo")) or "")
    flags = parsed["flags"]
    assert isinstance(flags, set)
    try:
        freq = psutil.cpu_freq()
    except Exception:
        freq = None
    try:
        vm = psutil.virtual_memory()
        total, available = int(vm.total), int(vm.available)
    except Exception:
        total = available = None
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    max_mhz = _max_mhz() or (float(freq.max) if freq is not None and freq.max else None)
    model = parsed["model"] or platform.processor() or None
    return CpuInfo(
        model=str(model) if model else None,
        vendor=str(parsed["vendor"]) if parsed["vendor"] else None,
        architecture=platform.machine(),
        sockets=parsed["sockets"],  # type: ignore[arg-type]
        cores=psutil.cpu_count(logical=False) or parsed["cores"],  # type: ignore[arg-type]
        threads=psutil.cpu_count(logical=True),
        cpus_usable=usable,
        clock_current_mhz=float(freq.current) if freq is not None and freq.current else None,
        clock_max_mhz=max_mhz,
        extensions=tuple(name for name, flag in EXTENSION_FLAGS if flag in flags),
        memory_total_bytes=total,
        memory_available_bytes=available,
        numa_nodes=_numa_nodes(),
    )
