"""Datasheet figures for GPUs, read from ``data/gpus.toml`` — the one place `hardware`, `bench` and `plan` get them.

These are *datasheet* peaks, always labelled as such; measured ceilings live in ``bench.ceilings``. A figure the
file does not have is ``None`` (printed "n/a"), never a guess.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from gpukit.errors import ConfigError

__all__ = ["GpuSpec", "all_specs", "get_spec", "match_spec"]

GB = 1e9


@dataclass(frozen=True)
class GpuSpec:
    key: str
    name: str
    match: tuple[str, ...]
    memory_gb: float
    memory_type: str
    bandwidth_gbps: float
    tflops: dict[str, float]  # dtype → dense TFLOP/s: fp32, tf32, fp16, bf16, fp8
    interconnect: str
    interconnect_gbps: float | None = None
    compute_capability: str | None = None
    unverified: tuple[str, ...] = field(default_factory=tuple)
    nvml_total_mib: int | None = None  # what the driver reports as total memory, where a real part was read
    allreduce_busbw_gbps: float | None = None  # published all-reduce busbw of a node of these (plan's fallback)
    allreduce_busbw_source: str | None = None

    @property
    def memory_bytes(self) -> float:
        """Memory a program can allocate from: the driver's total where known, else the datasheet GB × 10⁹ (which
        undercounts HBM parts by about 7 %)."""
        if self.nvml_total_mib:
            return float(self.nvml_total_mib * 2**20)
        return self.memory_gb * GB

    def peak_tflops(self, dtype: str) -> float | None:
        """Dense datasheet peak for ``dtype`` (fp32, tf32, fp16, bf16, fp8), or None when the part has none."""
        return self.tflops.get(dtype)


@cache
def all_specs() -> tuple[GpuSpec, ...]:
    text = resources.files("gpukit.hardware").joinpath("data/gpus.toml").read_text(encoding="utf-8")
    return tuple(_parse(tomllib.loads(text)))


def _parse(doc: dict) -> list[GpuSpec]:  # type: ignore[type-arg]
    specs = []
    for key, row in doc.get("gpu", {}).items():
        specs.append(
            GpuSpec(
                key=key,
                name=row["name"],
                match=tuple(m.lower() for m in row.get("match", [])),
                memory_gb=float(row["memory_gb"]),
                memory_type=row.get("memory_type", ""),
                bandwidth_gbps=float(row["bandwidth_gbps"]),
                tflops={k: float(v) for k, v in row.get("tflops", {}).items()},
                interconnect=row.get("interconnect", ""),
                interconnect_gbps=row.get("interconnect_gbps"),
                compute_capability=row.get("compute_capability"),
                unverified=tuple(row.get("unverified", [])),
                nvml_total_mib=row.get("nvml_total_mib"),
                allreduce_busbw_gbps=row.get("allreduce_busbw_gbps"),
                allreduce_busbw_source=row.get("allreduce_busbw_source"),
            )
        )
    return specs


def get_spec(key: str) -> GpuSpec:
    """The spec with catalog key ``key`` (e.g. ``h200-sxm``); a ConfigError naming the known keys otherwise."""
    for spec in all_specs():
        if spec.key == key.lower():
            return spec
    known = ", ".join(s.key for s in all_specs())
    raise ConfigError(f"unknown GPU '{key}'", hint=f"known GPUs: {known}")


def match_spec(device_name: str) -> GpuSpec | None:
    """The datasheet row for a device name as NVML or torch reports it (longest substring match), or None."""
    name = f" {device_name.lower()}"
    best: tuple[int, GpuSpec] | None = None
    for spec in all_specs():
        for pattern in spec.match:
            if pattern in name and (best is None or len(pattern) > best[0]):
                best = (len(pattern), spec)
    return best[1] if best else None
