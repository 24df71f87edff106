"""The report's "what" / "value" rows in words and units: no raw keys (``gpu_names []``), no unitless figures
(``cpu_mem_gbps 39.1``). A key the tables below do not know is still shown readably: its underscores become spaces
and a unit suffix (``_gbps``, ``_gib``, ``_s`` …) becomes the unit of its value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpukit.bench.results import Result, Run

__all__ = ["ceiling_rows", "label", "machine_rows", "value_text"]

# key → label, for the machine fingerprint, the settings and the ceilings
LABELS: dict[str, str] = {
    "hostname": "host",
    "cpu_model": "CPU",
    "cpu_cores": "CPU cores",
    "cpu_threads": "CPU threads",
    "cpu_count": "CPU threads",
    "gpu_count": "GPU count",
    "gpu_names": "GPUs",
    "driver_version": "NVIDIA driver",
    "cuda_driver_version": "CUDA version the driver supports",
    "python": "Python",
    "torch": "PyTorch",
    "numpy": "NumPy",
    "numba": "Numba",
    "numba-cuda": "Numba CUDA",
    "triton": "Triton",
    "spec_tflops": "datasheet dense TFLOP/s per dtype",
    "d2d_copy_gbps": "GPU memory: device-to-device copy (bytes read + written)",
    "h2d_pinned_gbps": "host → device copy, pinned memory",
    "d2h_pinned_gbps": "device → host copy, pinned memory",
    "h2d_pageable_gbps": "host → device copy, pageable memory",
    "d2h_pageable_gbps": "device → host copy, pageable memory",
    "cpu_mem_gbps": "CPU memory: copy on all cores (bytes read + written)",
    "gpu_name": "GPU measured",
    "spec_name": "datasheet row used",
    "spec_bandwidth_gbps": "datasheet memory bandwidth",
    "spec_fp32_tflops": "datasheet FP32 peak (dense)",
    "budget_s": "time budget per result",
    "sweep_budget_s": "sweep time budget",
    "workload_s": "time spent per workload",
    "repeats": "timed repeats per result",
    "warmup": "warm-up calls per result",
    "seed": "random seed of the inputs",
    "missing_workloads": "workloads not measured (interrupted)",
    "partial_workloads": "workloads measured in part (interrupted)",
}
# suffix → (unit, format); the longest matching suffix wins
UNITS: dict[str, tuple[str, str]] = {
    "_gbps": ("GB/s", ",.1f"),
    "_tflops": ("TFLOP/s", ",.1f"),
    "_gib": ("GiB", ",.2f"),
    "_mib": ("MiB", ",.0f"),
    "_mhz": ("MHz", ",.0f"),
    "_w": ("W", ",.0f"),
    "_c": ("°C", ",.0f"),
    "_s": ("s", ",.3g"),
}


def label(key: str) -> str:
    """A readable label for a key: the table above, else its words (``memory_gib`` → ``memory``)."""
    if key in LABELS:
        return LABELS[key]
    for suffix in sorted(UNITS, key=len, reverse=True):
        if key.endswith(suffix) and len(key) > len(suffix):
            key = key[: -len(suffix)]
            break
    return key.replace("_", " ").replace(".", " ")


def _unit(key: str) -> tuple[str, str] | None:
    for suffix in sorted(UNITS, key=len, reverse=True):
        if key.endswith(suffix):
            return UNITS[suffix]
    return None


def value_text(key: str, value: Any) -> str:
    """A value in words with its unit: ``None`` → "n/a", ``[]`` → "none", 4166.3 GB/s, 2 × NVIDIA H200."""
    if value is None or value == "":
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        if not value:
            return "none"
        if key == "gpu_names" and len(set(map(str, value))) == 1:
            return f"{len(value)} × {value[0]}"
        return ", ".join(value_text(key, v) for v in value)
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join(f"{k} {value_text(key, v)}" for k, v in value.items())
    unit = _unit(key)
    if isinstance(value, int | float) and unit:
        return f"{format(value, unit[1])} {unit[0]}"
    if isinstance(value, float):
        return format(value, ",.4g")
    return str(value)


def _flatten(prefix: str, obj: Any) -> list[tuple[str, str]]:
    """Nested dicts and lists of dicts as (label, value) rows; a key's unit follows it down."""
    if isinstance(obj, dict) and obj:
        out: list[tuple[str, str]] = []
        for k, v in obj.items():
            key = f"{prefix}_{k}" if prefix else str(k)
            out += _flatten(key, v)
        return out
    if isinstance(obj, list) and obj and all(isinstance(v, dict) for v in obj):
        rows = []
        for i, v in enumerate(obj):
            rows += [(f"{lab} (#{i})", val) for lab, val in _flatten(prefix.rstrip("s"), v)]
        return rows
    return [(label(prefix), value_text(prefix, obj))]


def machine_rows(run: Run) -> list[tuple[str, str]]:
    """The machine, the library versions and the run's settings, each row a label and a value with its unit."""
    rows: list[tuple[str, str]] = [
        ("run", f"#{run.id}" if run.id is not None else "unsaved"),
        ("started (UTC)", run.started_at or "n/a"),
    ]
    machine = dict(run.machine)
    if "gpu_names" in machine and "gpu_count" in machine:  # "2 × NVIDIA H200" says both
        machine.pop("gpu_count")
    if "gpu_names" in machine and not machine["gpu_names"]:
        machine["gpu_names"] = "none found"
    for k, v in run.versions.items():  # a version the fingerprint carries too is shown once, as a version
        if machine.get(k) == v:
            machine.pop(k)
    rows += _flatten("", machine)
    rows += [(_version_label(k), value_text(k, v)) for k, v in sorted(run.versions.items())]
    settings = {k: v for k, v in run.settings.items() if k != "crossovers"}
    rows += [(f"setting: {label(k)}", _setting_text(k, v)) for k, v in sorted(settings.items())]
    return rows


def _version_label(key: str) -> str:
    return f"version of {LABELS.get(key, key)}"


# settings whose empty value means "the default", not "none"
_EMPTY_SETTING = {"backends": "every backend available", "sizes": "each workload's default sizes"}


def _setting_text(key: str, value: Any) -> str:
    if key in _EMPTY_SETTING and not value:
        return _EMPTY_SETTING[key]
    return value_text(key, value)


def _gemm_ceilings(rows: Sequence[Result]) -> list[tuple[str, str]]:
    from gpukit.bench.report_plots import compute_ceilings

    found = compute_ceilings(rows)
    out = []
    for dev, name in (("gpu", "GPU"), ("cpu", "CPU")):
        if dev in found:
            flops, dtype = found[dev]
            out.append((f"{name} compute: best GEMM measured ({dtype})", f"{flops / 1e12:,.2f} TFLOP/s"))
    return out


def ceiling_rows(run: Run) -> list[tuple[str, str]]:
    """The ceilings measured in the run (memory and compute), then the datasheet figures beside them."""
    c = run.ceilings.to_dict()
    at = c.get("measured_at") or {}  # where each ceiling was measured: beside its value, not a row of raw keys
    skip = {"notes", "measured_at", "measured_x"}
    measured = [k for k in c if k not in skip and not k.startswith("spec_")]
    rows = [(label(k), _ceiling_text(k, c[k], at.get(k))) for k in measured]
    rows += _gemm_ceilings(run.results)
    rows += [(label(k), value_text(k, c[k])) for k in c if k.startswith("spec_") and c[k] not in ({}, [])]
    rows += [("note", str(n)) for n in c.get("notes") or []]
    return rows


def _ceiling_text(key: str, value: Any, where: str | None) -> str:
    if value is None:
        return "n/a (not measured)"
    return value_text(key, value) + (f" (at {where})" if where else "")
