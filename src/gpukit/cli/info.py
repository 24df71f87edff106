"""`gpukit info` — one view of the machine: CPU, GPUs (with their datasheet row), topology, software stack."""

from __future__ import annotations

from typing import Any

import typer

from gpukit.cli import render

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("info")(info)


def info(
    json_out: bool = typer.Option(False, "--json", help="Print the documented JSON document (docs/json-schemas.md)."),
    probe: bool | None = typer.Option(
        None,
        "--probe/--no-probe",
        help="Import each installed framework in a child to ask whether it sees a GPU. "
        "Default: only when an NVIDIA GPU is present.",
    ),
    timeout: float = typer.Option(60.0, "--timeout", min=1.0, help="Seconds each framework probe may take."),
) -> int:
    """What this machine has: CPU, each GPU, GPU topology and the software stack."""
    from gpukit.hardware import inventory

    inv: dict[str, Any] = inventory(probe_frameworks=probe, probe_timeout_s=timeout).to_dict()
    if json_out:
        render.print_json(inv)
        return 0
    _print_cpu(inv["cpu"])
    _print_gpus(inv["gpus"], inv["gpus_reason"])
    _print_topology(inv["topology"], inv["gpus"])
    _print_stack(inv["stack"])
    return 0


def _mhz(value: Any) -> str:
    return render.fmt(value, ".0f", "MHz")


def _print_cpu(cpu: dict[str, Any]) -> None:
    numa = ", ".join(f"node{n['node']}: cpus {n['cpus']}" for n in cpu["numa_nodes"]) or render.NA
    rows = [
        ("model", cpu["model"]),
        ("architecture", cpu["architecture"]),
        (
            "sockets / cores / threads",
            f"{render.fmt(cpu['sockets'])} / {render.fmt(cpu['cores'])} / "
            f"{render.fmt(cpu['threads'])} (usable here: {render.fmt(cpu['cpus_usable'])})",
        ),
        ("clock now / max", f"{_mhz(cpu['clock_current_mhz'])} / {_mhz(cpu['clock_max_mhz'])}"),
        ("vector / matrix extensions", ", ".join(cpu["extensions"]) or "none of AVX2/AVX-512/AMX/VNNI"),
        (
            "memory total / available",
            f"{render.fmt_bytes(cpu['memory_total_bytes'])} / {render.fmt_bytes(cpu['memory_available_bytes'])}",
        ),
        ("NUMA nodes", f"{len(cpu['numa_nodes'])}: {numa}"),
    ]
    render.console.print(render.table(("CPU", ""), rows, title="CPU"))


def _gpu_rows(g: dict[str, Any]) -> list[tuple[str, str]]:
    fmt = render.fmt
    links = g["nvlinks"]
    active = sum(1 for link in links if link["active"])
    procs = (
        ", ".join(
            f"{p['name'] or '?'} ({p['pid']}, {render.fmt_bytes(p['used_memory_bytes'])})" for p in g["processes"]
        )
        or "none"
    )
    ecc = render.NA if g["ecc_enabled"] is None else ("on" if g["ecc_enabled"] else "off")
    if g["ecc_enabled"]:
        ecc += (
            f" (uncorrectable now {fmt(g['ecc_uncorrected_volatile'])}, corrected now "
            f"{fmt(g['ecc_corrected_volatile'])}, uncorrectable lifetime {fmt(g['ecc_uncorrected_aggregate'])})"
        )
    return [
        ("uuid", fmt(g["uuid"])),
        ("PCI bus / NUMA node", f"{fmt(g['pci_bus_id'])} / {fmt(g['numa_node'])}"),
        ("compute capability / SMs", f"{fmt(g['compute_capability'])} / {fmt(g['sm_count'])}"),
        (
            "memory total / used / free",
            " / ".join(
                render.fmt_bytes(g[k]) for k in ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes")
            ),
        ),
        ("SM clock now / max", f"{_mhz(g['sm_clock_mhz'])} / {_mhz(g['sm_clock_max_mhz'])}"),
        ("memory clock now / max", f"{_mhz(g['mem_clock_mhz'])} / {_mhz(g['mem_clock_max_mhz'])}"),
        ("power draw / limit", f"{fmt(g['power_w'], '.0f', 'W')} / {fmt(g['power_limit_w'], '.0f', 'W')}"),
        ("temperature", fmt(g["temperature_c"], "", "°C")),
        (
            "utilisation GPU / memory",
            f"{fmt(g['utilization_pct'], '', '%')} / {fmt(g['mem_utilization_pct'], '', '%')}",
        ),
        (
            "PCIe now / max",
            f"Gen{fmt(g['pcie_gen_current'])} x{fmt(g['pcie_width_current'])} / "
            f"Gen{fmt(g['pcie_gen_max'])} x{fmt(g['pcie_width_max'])}",
        ),
        ("NVLink", f"{active} of {len(links)} links active" if links else "none / n/a"),
        ("ECC", ecc),
        ("throttle reasons", ", ".join(g["throttle_reasons"]) or "none"),
        ("MIG", render.NA if g["mig_enabled"] is None else ("enabled" if g["mig_enabled"] else "disabled")),
        ("processes", procs),
        ("datasheet", _datasheet(g["datasheet"])),
    ]


def _datasheet(row: dict[str, Any] | None) -> str:
    if not row:
        return "no datasheet row for this name (hardware/data/gpus.toml)"
    tf = row.get("tflops") or {}
    peaks = ", ".join(f"{k} {v:g}" for k, v in tf.items())
    link = f", {row['interconnect']}" if row.get("interconnect") else ""
    return (
        f"{row['name']}: {row['memory_gb']:g} GB {row.get('memory_type', '')}, {row['bandwidth_gbps']:g} GB/s, "
        f"TFLOP/s dense {peaks or render.NA}{link}"
    )


def _print_gpus(gpus: list[dict[str, Any]], reason: str | None) -> None:
    if not gpus:
        render.console.print(f"[bold]GPUs:[/] none — {reason or 'no GPU found'}")
        return
    for g in gpus:
        src = "" if g["source"] == "nvml" else f" (from {g['source']}: NVML unavailable)"
        render.console.print(
            render.table(("field", "value"), _gpu_rows(g), title=f"GPU {g['index']}: {g['name']}{src}")
        )


def _print_topology(topo: dict[str, Any], gpus: list[dict[str, Any]]) -> None:
    if len(gpus) < 2:
        return
    idx = topo["gpu_indices"]
    rows = []
    for i, row in zip(idx, topo["matrix"], strict=False):
        rows.append([f"GPU{i}", *[render.fmt(c) for c in row], render.fmt(topo["numa_affinity"].get(str(i)))])
    cols = ("", *[f"GPU{i}" for i in idx], "NUMA")
    render.console.print("[bold]GPU topology[/] (labels as nvidia-smi topo -m)", markup=True)
    render.console.print(render.table(cols, rows))
    render.console.print("  " + "; ".join(f"{k} = {v}" for k, v in topo["legend"].items()))


def _print_stack(s: dict[str, Any]) -> None:
    rows = [
        ("OS / kernel", f"{s['os']} / {s['kernel']}"),
        ("Python", f"{s['python']} ({s['python_executable']})"),
        ("numpy", render.fmt(s["numpy"])),
        (
            "NVIDIA driver / CUDA it supports",
            f"{render.fmt(s['driver_version'])} / {render.fmt(s['cuda_driver_version'])}",
        ),
        ("nvcc", f"{s['nvcc_version']} ({s['nvcc_path']})" if s["nvcc_path"] else "not on PATH"),
        ("CUDA toolkits", ", ".join(s["cuda_toolkits"]) or "none under /usr/local/cuda*"),
        (
            "CUDA_VISIBLE_DEVICES",
            render.fmt(s["cuda_visible_devices"]) if s["cuda_visible_devices"] is not None else "not set",
        ),
    ]
    render.console.print(render.table(("software", ""), rows, title="Software stack"))
    fw_rows = [_framework_row(f) for f in s["frameworks"].values() if f["installed"]]
    if fw_rows:
        render.console.print(
            render.table(("framework", "version", "build", "sees GPU", "notes"), fw_rows, title="GPU frameworks")
        )


def _framework_row(f: dict[str, Any]) -> tuple[str, ...]:
    d = f["details"]
    build = (
        " ".join(
            x
            for x in (
                d.get("build") or "",
                f"CUDA {d['cuda_runtime']}" if d.get("cuda_runtime") else "",
                f"cuDNN {d['cudnn']}" if d.get("cudnn") else "",
                f"NCCL {d['nccl']}" if d.get("nccl") else "",
                f"numba-cuda {d['numba_cuda']}" if d.get("numba_cuda") else "",
            )
            if x
        )
        or render.NA
    )
    if not f["probed"]:
        sees, note = "not probed", "--probe to import it in a child"
    elif not f["importable"]:
        sees, note = "no", f"import fails: {f['error']}"
    else:
        sees = f"yes ({f['device_count']})" if f["sees_gpu"] else "no"
        note = (
            f"{f['failed_stage']} fails: {f['error']}" if f["error"] else ("test kernel ran" if f["kernel_ok"] else "")
        )
    return (f["name"], render.fmt(f["version"]), build, sees, note)
