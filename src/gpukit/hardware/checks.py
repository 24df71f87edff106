"""The doctor's checks: small functions of :class:`Facts` returning findings, in one registry.

Levels: FAIL (broken: fix before trusting the GPU), WARN (works but costs you), PASS, SKIP (does not apply here).
Every non-PASS finding carries a hint with the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gpukit.hardware.facts import Facts, Finding, Level
from gpukit.hardware.gpu import GpuInfo
from gpukit.hardware.stack import FrameworkProbe

__all__ = ["CHECKS", "diagnose_import_error", "parse_version", "visible_gpu_count"]

Check = Callable[[Facts], list[Finding]]

_HW_BAD = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
BUSY_UTILIZATION_PCT = 50  # above this a downtrained PCIe link is a real cost, below it the GPU may just be idle


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """ "12.8" / "0.30.4" / "2.5.2rc1" → (12, 8) / (0, 30, 4) / (2, 5, 2); None when there is no leading number."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _f(check: str, level: Level, message: str, hint: str | None = None) -> Finding:
    return Finding(check, level, message, hint)


def check_driver(f: Facts) -> list[Finding]:
    if not f.has_nvidia_gpu:
        return [_f("driver", "SKIP", "no NVIDIA GPU on the PCI bus and NVML sees none")]
    if not f.nvml_ok and not f.kernel_module_loaded:
        bound = ", ".join(f"{d.address} ({d.driver or 'no driver'})" for d in f.pci_devices)
        return [
            _f(
                "driver",
                "FAIL",
                f"{len(f.pci_devices)} NVIDIA device(s) on the PCI bus but no nvidia driver loaded: {bound}",
                "install the NVIDIA driver (Ubuntu: `sudo ubuntu-drivers install`, or the .run/.deb from nvidia.com), "
                "blacklist nouveau if it is bound, then reboot; `nvidia-smi` must list the GPU",
            )
        ]
    return [
        _f(
            "driver",
            "PASS",
            f"NVIDIA driver {f.driver_version or 'n/a'} (supports CUDA {f.cuda_driver_version or 'n/a'})",
        )
    ]


def _nvml_hint(error: str) -> str:
    if "nvidia-ml-py is not installed" in error:  # the Python binding, a gpukit dependency, is gone
        return "pip install nvidia-ml-py  (gpukit depends on it; reinstalling gpukit brings it back)"
    if "Mismatch" in error:
        return (
            "the driver was upgraded but the old kernel module is still loaded: reboot (or reload the nvidia modules)"
        )
    if "LibraryNotFound" in error:
        return (
            "libnvidia-ml.so.1 is not on the loader path: in a container run with `--gpus all` (NVIDIA Container "
            "Toolkit); on a host reinstall the driver's user-space libraries"
        )
    if "NoPermission" in error:
        return "this user cannot open /dev/nvidia*: add it to the group owning the device nodes (often `video`)"
    return "run `nvidia-smi` to see the driver's own error; reinstalling the driver and rebooting usually fixes it"


def check_nvml(f: Facts) -> list[Finding]:
    if not f.has_nvidia_gpu:
        return [_f("nvml", "SKIP", "no NVIDIA GPU")]
    if f.nvml_ok:
        return [_f("nvml", "PASS", f"NVML answers and sees {len(f.gpus)} GPU(s)")]
    if not f.kernel_module_loaded:
        return [_f("nvml", "SKIP", "the driver is not loaded (see check 'driver')")]
    error = f.nvml_error or "NVML did not initialise"
    return [_f("nvml", "FAIL", f"the nvidia driver is loaded but NVML fails: {error}", _nvml_hint(error))]


def _torch(f: Facts) -> FrameworkProbe | None:
    t = f.framework("torch")
    return t if t is not None and t.installed else None


def _cu_tag(cuda: str | None) -> str:
    v = parse_version(cuda)
    return f"cu{v[0]}{v[1] if len(v) > 1 else 0}" if v else "cu128"


def check_torch_build(f: Facts) -> list[Finding]:
    t = _torch(f)
    if t is None:
        return [_f("torch_build", "SKIP", "torch is not installed")]
    build = t.details.get("build")
    if not f.has_nvidia_gpu:
        return [_f("torch_build", "PASS", f"torch {t.version} ({build or 'n/a'} build); no NVIDIA GPU here")]
    if build in ("cpu", "rocm"):
        return [
            _f(
                "torch_build",
                "FAIL",
                f"torch {t.version} is a {build.upper() if build == 'cpu' else 'ROCm'}-only build but this machine "
                "has an NVIDIA GPU",
                f"pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/"
                f"{_cu_tag(f.cuda_driver_version)}  (a CUDA build no newer than the driver's CUDA "
                f"{f.cuda_driver_version or 'version'})",
            )
        ]
    return [_f("torch_build", "PASS", f"torch {t.version} is a CUDA {t.details.get('cuda_runtime') or 'n/a'} build")]


def check_torch_cuda_runtime(f: Facts) -> list[Finding]:
    t = _torch(f)
    runtime = t.details.get("cuda_runtime") if t is not None else None
    if t is None or not runtime:
        return [_f("torch_cuda_runtime", "SKIP", "no CUDA build of torch installed")]
    rt, drv = parse_version(runtime), parse_version(f.cuda_driver_version)
    if rt is None or drv is None:
        return [_f("torch_cuda_runtime", "SKIP", "the driver's CUDA version is unknown (no driver / NVML)")]
    msg = f"torch {t.version} uses CUDA runtime {runtime}; the driver {f.driver_version or ''} supports up to CUDA "
    msg += str(f.cuda_driver_version)
    fix = f"upgrade the NVIDIA driver, or install a torch built for CUDA <= {f.cuda_driver_version}: pip install torch "
    fix += f"--index-url https://download.pytorch.org/whl/{_cu_tag(f.cuda_driver_version)}"
    if rt[0] > drv[0]:
        return [_f("torch_cuda_runtime", "FAIL", msg + ": too old for this torch", fix)]
    if rt[:2] > drv[:2]:
        return [_f("torch_cuda_runtime", "WARN", msg + ": runs via minor-version compatibility, PTX JIT may fail", fix)]
    return [_f("torch_cuda_runtime", "PASS", msg)]


_NP_ATTR = (re.compile(r"numpy' has no attribute '(\w+)'"), re.compile(r"`?np\.(\w+)`? was removed"))


def diagnose_import_error(p: FrameworkProbe) -> tuple[str, str]:
    """(message, hint) for a framework that cannot be imported or cannot run a kernel, naming cause and versions."""
    error = " ".join((p.error or "unknown error").split())
    error = error if len(error) <= 300 else error[:297] + "..."  # the whole text stays in the probe's JSON
    doing = "imports but cannot compile or run a kernel" if p.failed_stage == "kernel" else "cannot be imported"
    culprit = p.culprit or {}
    where = f" at {culprit.get('file')}:{culprit.get('line')}" if culprit.get("file") else ""
    attr = next((m.group(1) for rx in _NP_ATTR if (m := rx.search(error))), None)
    if attr is None and "np." in str(culprit.get("code", "")) and error.startswith("AttributeError"):
        m = re.search(r"np\.(\w+)", str(culprit.get("code", "")))
        attr = m.group(1) if m else None
    if attr is not None:
        dist = culprit.get("distribution") or (
            "numba-cuda" if p.name == "numba" and p.details.get("numba_cuda") else p.distribution or p.name
        )
        version = culprit.get("distribution_version") or (
            p.details.get("numba_cuda") if dist == "numba-cuda" else p.version
        )
        np_v = p.numpy_version or "n/a"
        np_t = parse_version(p.numpy_version)
        pin = f"numpy<{np_t[0]}.{np_t[1]}" if np_t and len(np_t) > 1 else "numpy<2.5"
        return (
            f"{p.name} {doing}: {dist} {version} calls np.{attr}, which numpy {np_v} no longer has{where}",
            f'pip install "{pin}"  (or upgrade {dist} to a release that supports numpy {np_v})',
        )
    if re.search(r"lib(cu|nv|nccl)\w*\.so", error):
        return (
            f"{p.name} {p.version or ''} {doing}: a CUDA library does not load: {error}{where}",
            "install the CUDA libraries this build expects (the pip nvidia-* wheels or the toolkit) or add their "
            "lib64 directory to LD_LIBRARY_PATH",
        )
    return (
        f"{p.name} {p.version or ''} {doing}: {error}{where}",
        f"run `python -c 'import {p.name}'` (and a small kernel) for the full traceback; reinstall with "
        f"`pip install --force-reinstall {p.distribution or p.name}`",
    )


def _framework_finding(f: Facts, p: FrameworkProbe) -> Finding:
    check = f"framework:{p.name}"
    label = f"{p.name} {p.version or ''}".strip()
    if not p.probed:
        return _f(check, "SKIP", f"{label} installed; import not probed")
    if p.timed_out:
        return _f(check, "FAIL", f"{label}: {p.error}", f"run `python -c 'import {p.name}'` to see where it hangs")
    if not p.importable or p.failed_stage == "kernel":
        message, hint = diagnose_import_error(p)
        return _f(check, "FAIL", message, hint)
    if p.sees_gpu:
        ran = ", test kernel ran" if p.kernel_ok else ""
        return _f(check, "PASS", f"{label} sees {p.device_count if p.device_count is not None else 'the'} GPU(s){ran}")
    if not f.gpus:
        return _f(check, "PASS", f"{label} imports; no usable GPU here to see")
    why = p.details.get("gpu_error") or p.error or "no device reported"
    hint = "check CUDA_VISIBLE_DEVICES and that this build targets CUDA (not CPU-only)"
    if p.name == "torch" and p.details.get("build") == "cpu":
        hint = "this is a CPU-only torch build (see check 'torch_build')"
    return _f(check, "FAIL", f"{label} imports but sees no GPU ({why})", hint)


def check_frameworks(f: Facts) -> list[Finding]:
    installed = [p for p in f.frameworks if p.installed]
    if not installed:
        return [_f("framework", "SKIP", "no GPU framework installed (torch, numba, cupy, triton, jax, ...)")]
    return [_framework_finding(f, p) for p in installed]


def _cupy_cuda_major(p: FrameworkProbe) -> int | None:
    m = re.search(r"cuda(\d+)x", p.distribution or "")
    if m:
        return int(m.group(1))
    v = parse_version(p.details.get("cuda_runtime"))
    return v[0] if v else None


def check_cupy_cuda(f: Facts) -> list[Finding]:
    p = f.framework("cupy")
    if p is None or not p.installed:
        return [_f("cupy_cuda", "SKIP", "cupy is not installed")]
    major, drv = _cupy_cuda_major(p), parse_version(f.cuda_driver_version)
    if major is None or drv is None:
        return [_f("cupy_cuda", "SKIP", "cupy's CUDA version or the driver's is unknown")]
    label = f"{p.distribution or 'cupy'} {p.version or ''}".strip()
    if major > drv[0]:
        return [
            _f(
                "cupy_cuda",
                "FAIL",
                f"{label} is built for CUDA {major} but the driver supports only CUDA {f.cuda_driver_version}",
                f"pip uninstall {p.distribution or 'cupy'} && pip install cupy-cuda{drv[0]}x  (or upgrade the driver)",
            )
        ]
    note = "" if major == drv[0] else " (older CUDA major: runs through driver backward compatibility)"
    return [
        _f("cupy_cuda", "PASS", f"{label} is built for CUDA {major}; driver supports {f.cuda_driver_version}{note}")
    ]


def check_nvcc(f: Facts) -> list[Finding]:
    if not f.nvcc_path:
        return [_f("nvcc", "SKIP", "nvcc is not on PATH")]
    nvcc = parse_version(f.nvcc_version)
    t = _torch(f)
    runtime = t.details.get("cuda_runtime") if t is not None else None
    rt, drv = parse_version(runtime), parse_version(f.cuda_driver_version)
    head = f"nvcc {f.nvcc_version or 'n/a'} ({f.nvcc_path})"
    match = next((tk for tk in f.cuda_toolkits if runtime and tk.endswith(f"-{runtime}")), None)
    if nvcc and rt and nvcc[0] != rt[0]:
        fix = f'export PATH="{match}/bin:$PATH"' if match else f"install CUDA toolkit {runtime} and put its bin first"
        return [
            _f(
                "nvcc",
                "WARN",
                f"{head} does not match torch's CUDA runtime {runtime}: extensions built with it will fail",
                fix + " (torch.utils.cpp_extension checks the major version)",
            )
        ]
    if nvcc and drv and nvcc[:2] > drv[:2]:
        return [
            _f(
                "nvcc",
                "WARN",
                f"{head} is newer than the driver's CUDA {f.cuda_driver_version}: its binaries will not load",
                "upgrade the driver, or compile with a toolkit no newer than the driver supports",
            )
        ]
    return [
        _f("nvcc", "PASS", f"{head} matches runtime {runtime or 'n/a'} and driver {f.cuda_driver_version or 'n/a'}")
    ]


def check_toolkit_paths(f: Facts) -> list[Finding]:
    if not f.cuda_toolkits:
        return [_f("cuda_paths", "SKIP", "no CUDA toolkit under /usr/local/cuda*")]
    root = next((t for t in f.cuda_toolkits if t != "/usr/local/cuda"), f.cuda_toolkits[0])
    seed = f'add to ~/.bashrc: export PATH="{root}/bin:$PATH"; export LD_LIBRARY_PATH="{root}/lib64:$LD_LIBRARY_PATH"'
    if not f.nvcc_path:
        return [_f("cuda_paths", "WARN", f"CUDA toolkit installed at {root} but nvcc is not on PATH", seed)]
    lib_dirs = [d for d in (f.ld_library_path or "").split(":") if d] + list(f.ld_so_conf_paths)
    if not any(d.rstrip("/").startswith(tk) for d in lib_dirs for tk in f.cuda_toolkits):
        return [
            _f(
                "cuda_paths",
                "WARN",
                f"CUDA toolkit at {root}: nvcc is on PATH but its lib64 is neither in LD_LIBRARY_PATH nor in ldconfig",
                seed,
            )
        ]
    return [_f("cuda_paths", "PASS", f"CUDA toolkit {root}: nvcc on PATH, libraries on the loader path")]


def visible_gpu_count(value: str, gpus: tuple[GpuInfo, ...]) -> int:
    """How many GPUs CUDA will show for CUDA_VISIBLE_DEVICES=value (CUDA stops at the first invalid entry)."""
    seen = 0
    indices = {g.index for g in gpus}
    uuids = [g.uuid or "" for g in gpus]
    for raw in value.split(","):
        entry = raw.strip()
        if entry.lstrip("-").isdigit():
            if int(entry) not in indices:
                break
        elif entry.startswith(("GPU-", "MIG-")):
            if not any(u.startswith(entry) for u in uuids):
                break
        else:
            break
        seen += 1
    return seen


def check_cuda_visible_devices(f: Facts) -> list[Finding]:
    value = f.cuda_visible_devices
    if value is None:
        return [_f("cuda_visible_devices", "PASS", f"not set: all {len(f.gpus)} GPU(s) visible")]
    if not f.gpus:
        return [_f("cuda_visible_devices", "SKIP", f"set to '{value}' but NVML lists no GPU to compare with")]
    shown = visible_gpu_count(value, f.gpus)
    fix = "unset CUDA_VISIBLE_DEVICES (or list the GPUs you want, e.g. CUDA_VISIBLE_DEVICES=0,1)"
    if shown == 0:
        return [
            _f("cuda_visible_devices", "FAIL", f"CUDA_VISIBLE_DEVICES='{value}' hides all {len(f.gpus)} GPU(s)", fix)
        ]
    if shown < len(f.gpus):
        msg = f"CUDA_VISIBLE_DEVICES='{value}' shows {shown} of {len(f.gpus)} GPUs"
        return [_f("cuda_visible_devices", "WARN", msg, fix)]
    return [_f("cuda_visible_devices", "PASS", f"CUDA_VISIBLE_DEVICES='{value}' shows all {shown} GPU(s)")]


def _per_gpu(f: Facts, check: str, fn: Callable[[GpuInfo], Finding]) -> list[Finding]:
    if not f.gpus:
        return [_f(check, "SKIP", "no GPU visible to NVML")]
    return [fn(g) for g in f.gpus]


def _pcie(g: GpuInfo) -> Finding:
    cur, mx = (g.pcie_gen_current, g.pcie_width_current), (g.pcie_gen_max, g.pcie_width_max)
    if None in cur or None in mx:
        return _f("pcie_link", "SKIP", f"GPU {g.index}: PCIe link state n/a")
    link = f"GPU {g.index}: PCIe Gen{cur[0]} x{cur[1]} (max Gen{mx[0]} x{mx[1]})"
    if cur[0] >= mx[0] and cur[1] >= mx[1]:  # type: ignore[operator]
        return _f("pcie_link", "PASS", link + " at full speed")
    util = g.utilization_pct
    if util is not None and util >= BUSY_UTILIZATION_PCT:
        return _f(
            "pcie_link",
            "WARN",
            f"{link} below its maximum while {util} % busy",
            "reseat the card or move it to a full x16 slot, check the BIOS PCIe setting and risers; "
            "`nvidia-smi -q -d PCI` shows the link",
        )
    return _f("pcie_link", "PASS", f"{link}: below max while idle ({util if util is not None else 'n/a'} %) — normal")


def _na(value: object) -> str:
    return "n/a" if value is None else f"{value:.0f}" if isinstance(value, float) else str(value)


def _throttle(g: GpuInfo) -> Finding:
    reasons = set(g.throttle_reasons)
    bad = sorted(reasons & set(_HW_BAD))
    if bad:
        return _f(
            "throttling",
            "FAIL",
            f"GPU {g.index} is throttled now: {', '.join(bad)} ({_na(g.temperature_c)} °C)",
            "check cooling (fans, airflow, inlet temperature) and the power supply; `nvidia-smi -q -d PERFORMANCE`",
        )
    if "sw_power_cap" in reasons:
        return _f(
            "throttling",
            "WARN",
            f"GPU {g.index} is at its power limit ({_na(g.power_w)} W of {_na(g.power_limit_w)} W): clocks capped",
            "expected under full load; if the limit is below the datasheet TDP, raise it with `nvidia-smi -pl`",
        )
    note = f" ({', '.join(sorted(reasons))})" if reasons else ""
    return _f("throttling", "PASS", f"GPU {g.index}: no power or thermal throttling{note}")


def _ecc(g: GpuInfo) -> Finding:
    if g.ecc_enabled is None:
        return _f("ecc", "SKIP", f"GPU {g.index}: ECC not supported")
    if not g.ecc_enabled:
        return _f("ecc", "PASS", f"GPU {g.index}: ECC is off")
    if g.ecc_uncorrected_volatile:
        return _f(
            "ecc",
            "FAIL",
            f"GPU {g.index}: {g.ecc_uncorrected_volatile} uncorrectable ECC error(s) since the driver loaded",
            "results on this GPU are suspect: drain it and reset it (`nvidia-smi -r -i "
            f"{g.index}`) or reboot; if errors recur, ask the provider to replace it",
        )
    if g.ecc_uncorrected_aggregate:
        return _f(
            "ecc",
            "WARN",
            f"GPU {g.index}: {g.ecc_uncorrected_aggregate} uncorrectable ECC error(s) over its lifetime, none now",
            "watch `nvidia-smi -q -d ECC,PAGE_RETIREMENT`; recurring errors mean the GPU should be replaced",
        )
    return _f("ecc", "PASS", f"GPU {g.index}: ECC on, no uncorrectable errors")


def check_pcie(f: Facts) -> list[Finding]:
    return _per_gpu(f, "pcie_link", _pcie)


def check_throttling(f: Facts) -> list[Finding]:
    return _per_gpu(f, "throttling", _throttle)


def check_ecc(f: Facts) -> list[Finding]:
    return _per_gpu(f, "ecc", _ecc)


def check_processes(f: Facts) -> list[Finding]:
    def one(g: GpuInfo) -> Finding:
        others = [p for p in g.processes if p.pid not in f.own_pids]
        if not others:
            return _f("gpu_processes", "PASS", f"GPU {g.index}: no other process holds memory")
        gib = sum(p.used_memory_bytes or 0 for p in others) / 2**30
        who = ", ".join(f"{p.name or '?'} (pid {p.pid})" for p in others[:4])
        return _f(
            "gpu_processes",
            "WARN",
            f"GPU {g.index}: {len(others)} other process(es) hold {gib:.1f} GiB: {who}",
            "they compete for memory and compute: stop them or pick a free GPU with CUDA_VISIBLE_DEVICES",
        )

    return _per_gpu(f, "gpu_processes", one)


CHECKS: tuple[tuple[str, Check], ...] = (
    ("driver", check_driver),
    ("nvml", check_nvml),
    ("torch_build", check_torch_build),
    ("torch_cuda_runtime", check_torch_cuda_runtime),
    ("framework", check_frameworks),
    ("cupy_cuda", check_cupy_cuda),
    ("nvcc", check_nvcc),
    ("cuda_paths", check_toolkit_paths),
    ("cuda_visible_devices", check_cuda_visible_devices),
    ("pcie_link", check_pcie),
    ("throttling", check_throttling),
    ("ecc", check_ecc),
    ("gpu_processes", check_processes),
)
