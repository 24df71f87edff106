"""What CPU this is: model, topology, clocks, vector/matrix extensions, memory and NUMA nodes; and how many of its
CPUs this process may use (``cpu_budget``: what a pool of threads or processes is sized by).

Read from /proc/cpuinfo, /sys and psutil; every field that cannot be read here is ``None``.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "EXTENSION_FLAGS",
    "CpuInfo",
    "NumaNode",
    "amx_bf16_usable",
    "cpu_budget",
    "cpu_budget_of",
    "cpu_quota",
    "parse_cpuinfo",
    "parse_cpulist",
    "pci_local_cpus",
    "read_cpu",
    "usable_cpus",
]

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
    cpus_usable: int | None  # CPUs this process may keep busy (``cpu_budget``: affinity, cgroup quota)
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


def amx_bf16_usable(cpuinfo: str | None = None, max_isa: str | None = None) -> bool:
    """Whether oneDNN runs bf16 convolutions and matmuls on AMX tiles here: the CPU has ``amx_bf16`` and
    ``ONEDNN_MAX_CPU_ISA`` (when set) does not cap oneDNN below AMX.

    Only AMX makes CPU bf16 worth it: the default network's training step on 2 cores took 0.60x the fp32 time with AMX,
    1.16x with AVX512-BF16 alone, 2.2x with bf16 emulated on AVX-512 and 7.3x on AVX2
    (benchmarks/train-cpu-amp_2026-12-04.md).
    """
    text = _read(Path("/proc/cpuinfo")) if cpuinfo is None else cpuinfo
    flags = parse_cpuinfo(text or "")["flags"]
    if max_isa is None:
        max_isa = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    capped = max_isa.strip().upper() not in ("", "ALL", "DEFAULT") and "AMX" not in max_isa.upper()
    return "amx_bf16" in flags and not capped  # type: ignore[operator]


def usable_cpus() -> tuple[int, ...] | None:
    """The CPUs this process may run on (its affinity), or None where the system cannot say (not Linux)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return None


def cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The CPUs this process's cgroup may keep busy, rounded up (a container's CPU limit: Kubernetes' ``limits.cpu``,
    ``docker run --cpus``), or None without a limit. Its affinity does not show one: a pod limited to 4 CPUs of a
    64-CPU node may run on all 64. cgroup v2's ``cpu.max``, else v1's ``cfs_quota_us`` / ``cfs_period_us``, at
    ``root``: a container's own cgroup is mounted there; a limit set on a parent cgroup only is not seen (None)."""
    try:
        if (root / "cpu.max").is_file():
            quota, period = (root / "cpu.max").read_text().split()[:2]
        else:
            v1 = next((d for d in (root / "cpu", root / "cpu,cpuacct") if (d / "cpu.cfs_quota_us").is_file()), None)
            if v1 is None:
                return None
            quota, period = ((v1 / f"cpu.cfs_{name}_us").read_text().strip() for name in ("quota", "period"))
        if quota in ("max", "-1") or int(period) <= 0:
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # unreadable or not numbers: no limit known
        return None


def cpu_budget() -> int:
    """The CPUs this process may keep busy: ``cpu_budget_of(usable_cpus(), cpu_quota())``. Size a pool of busy
    threads or processes by this, not by ``os.cpu_count()`` (the machine's, whatever this process may use)."""
    return cpu_budget_of(usable_cpus(), cpu_quota())


def cpu_budget_of(cpus: Sequence[int] | None, quota: int | None) -> int:
    """How many of ``cpus`` (an affinity; None: the system's count) a cgroup ``quota`` (None: no limit) lets a process
    keep busy; at least 1."""
    n = len(cpus) if cpus is not None else os.cpu_count() or 1
    return max(1, min(n, quota or n))


def parse_cpulist(text: str) -> tuple[int, ...]:
    """A kernel cpulist ("0-3,8,10-11") as CPU numbers, in order; ValueError for what is not one."""
    cpus: list[int] = []
    for part in filter(None, text.strip().split(",")):
        first, _, last = part.partition("-")
        lo, hi = int(first), int(last or first)
        if lo < 0 or hi < lo:
            raise ValueError(f"not a CPU range: {part!r}")
        cpus.extend(range(lo, hi + 1))
    return tuple(cpus)


def pci_local_cpus(bus_id: str, root: Path = Path("/sys/bus/pci/devices")) -> tuple[int, ...] | None:
    """The CPUs of the NUMA node a PCI device (a GPU, "0000:18:00.0") hangs off: its ``local_cpulist`` in sysfs, or
    None where sysfs does not say (not Linux, no such device, an empty or unreadable list)."""
    try:
        cpus = parse_cpulist(_read(root / bus_id.lower() / "local_cpulist") or "")
    except ValueError:
        return None
    return cpus or None


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


def _meminfo() -> tuple[int | None, int | None]:
    """(total, available) bytes: psutil when installed, else /proc/meminfo."""
    try:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available)
    except Exception:  # psutil missing or failing: read the kernel's numbers
        pass
    values: dict[str, int] = {}
    for line in (_read(Path("/proc/meminfo")) or "").splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemAvailable") and rest.split():
            values[key] = int(rest.split()[0]) * 1024
    return values.get("MemTotal"), values.get("MemAvailable")


def _physical_cores(parsed_cores: object) -> int | None:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
        if n:
            return int(n)
    except Exception:
        pass
    return parsed_cores if isinstance(parsed_cores, int) else None


def _current_mhz(cpuinfo: str) -> float | None:
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq is not None and freq.current:
            return float(freq.current)
    except Exception:
        pass
    for line in cpuinfo.splitlines():
        if line.startswith("cpu MHz"):
            return float(line.partition(":")[2])
    return None


def read_cpu() -> CpuInfo:
    """The CPU of this machine; never raises (unknown fields are None). psutil is used when installed."""
    text = _read(Path("/proc/cpuinfo")) or ""
    parsed = parse_cpuinfo(text)
    flags = parsed["flags"]
    assert isinstance(flags, set)
    total, available = _meminfo()
    model = parsed["model"] or platform.processor() or None
    return CpuInfo(
        model=str(model) if model else None,
        vendor=str(parsed["vendor"]) if parsed["vendor"] else None,
        architecture=platform.machine(),
        sockets=parsed["sockets"],  # type: ignore[arg-type]
        cores=_physical_cores(parsed["cores"]),
        threads=os.cpu_count(),
        cpus_usable=cpu_budget(),
        clock_current_mhz=_current_mhz(text),
        clock_max_mhz=_max_mhz(),
        extensions=tuple(name for name, flag in EXTENSION_FLAGS if flag in flags),
        memory_total_bytes=total,
        memory_available_bytes=available,
        numa_nodes=_numa_nodes(),
    )
