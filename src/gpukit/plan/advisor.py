"""Puts the pieces together: memory per GPU, which GPUs fit (and how many it takes), time, and cost per instance."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpukit.errors import PlanError
from gpukit.hardware.specs import GpuSpec, all_specs, get_spec, match_spec
from gpukit.plan.calibration import Calibration
from gpukit.plan.catalog import Instance, load_catalog
from gpukit.plan.comm import estimate_comm
from gpukit.plan.compute import TimeEstimate, estimate_time
from gpukit.plan.memory import MemoryBreakdown, PlanSettings, estimate_memory
from gpukit.plan.models import ModelSpec, TransformerSpec

__all__ = ["GpuFit", "InstanceCost", "PlanResult", "make_plan"]

SEARCH_GPUS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class GpuFit:
    gpu: str
    name: str
    memory_bytes: int
    fits: bool  # with the requested --gpus/--tp/--shard
    fewest_gpus: int | None  # fewest that fit (searched up to 512), None when even that is not enough
    fewest_gpus_layout: str  # how those GPUs are used: "fsdp × 4", "tp 8", …
    free_bytes: int  # memory left on one GPU with the requested layout (negative: short by that much)
    memory_source: str = ""  # where memory_bytes comes from: the driver's total, or the datasheet GB (assumed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InstanceCost:
    instance: str
    gpu: str
    gpus: int
    usd_per_hour: float
    fits: bool
    layout: str
    time_s: float | None  # training: the whole --tokens/--samples run; inference: None
    usd: float | None  # training: the whole run
    usd_per_million: float | None  # training: per million tokens (samples for CNNs); inference: generated tokens
    #                                at the bandwidth bound (what an optimised server approaches)
    tokens_per_s: float | None
    source: str
    as_of: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PlanResult:
    model: dict[str, Any]
    params: int
    active_params: int
    settings: PlanSettings
    memory: MemoryBreakdown
    fits: list[GpuFit]
    time: TimeEstimate | None  # None: no layout fits the headline GPU
    time_gpu: str
    cost: list[InstanceCost]
    work: float | None
    work_unit: str
    notes: list[str] = field(default_factory=list)
    time_layout: str = ""  # the layout the headline time is for
    time_as_asked: bool = True  # False: the asked layout does not fit the headline GPU, time_layout is what does
    communication: Any = None  # plan.comm.CommEstimate for several GPUs

    def to_dict(self) -> dict[str, Any]:
        mem = self.memory.to_dict()
        notes = mem.pop("notes") + self.notes
        return {
            "model": self.model,
            "params": self.params,
            "active_params": self.active_params,
            "settings": asdict(self.settings),
            **mem,
            "memory_notes": notes,
            "fits": [f.to_dict() for f in self.fits],
            "time": {
                "gpu": self.time_gpu,
                "layout": self.time_layout,
                "as_asked": self.time_as_asked,
                "fits": self.time is not None,
                "work": self.work,
                "work_unit": self.work_unit,
                **(self.time.to_dict() if self.time else {"task": self.settings.task}),
            },
            "cost": [c.to_dict() for c in self.cost],
            "communication": self.communication.to_dict() if self.communication else None,
        }


def _layouts(model: ModelSpec, s: PlanSettings, n: int) -> list[tuple[str, PlanSettings]]:
    """Ways to spread the work over n GPUs, least communication first."""
    if s.task == "infer":
        if isinstance(model, TransformerSpec) and model.num_heads % n == 0:
            return [("1 GPU" if n == 1 else f"tp {n}", dataclasses.replace(s, gpus=n, tp=n))]
        return [] if n > 1 else [("1 GPU", dataclasses.replace(s, gpus=1, tp=1))]
    if n == 1:
        return [("1 GPU", dataclasses.replace(s, gpus=1, tp=1, shard="ddp"))]
    out = [(f"{s.shard} × {n}", dataclasses.replace(s, gpus=n, tp=1))] if s.tp == 1 else []
    if s.shard not in ("zero3", "fsdp"):
        out.append((f"fsdp × {n}", dataclasses.replace(s, gpus=n, tp=1, shard="fsdp")))
    if isinstance(model, TransformerSpec) and n <= 8 and model.num_heads % n == 0 and model.num_kv_heads % n == 0:
        out.append((f"tp {n}", dataclasses.replace(s, gpus=n, tp=n, shard="ddp")))
    return out


def _fewest(model: ModelSpec, s: PlanSettings, spec: GpuSpec) -> tuple[int | None, str]:
    for n in SEARCH_GPUS:
        for label, layout in _layouts(model, s, n):
            try:
                if estimate_memory(model, layout).total_bytes <= spec.memory_bytes:
                    return n, label
            except PlanError:
                continue
    return None, "does not fit"


def memory_source(spec: GpuSpec) -> str:
    """Where a part's usable memory comes from. The driver's total (NVML) is what a program allocates from; where
    gpus.toml has none sourced, the datasheet's GB × 10⁹ stands in, which undercounts HBM parts by about 7 %: an
    assumption, and labelled as one (an H100 PCIe then plans as 74.51 GiB beside the H100 SXM's measured 79.65)."""
    if spec.nvml_total_mib:
        return f"driver total {spec.nvml_total_mib:,} MiB (NVML)"
    return f"assumed: datasheet {spec.memory_gb:g} GB × 10⁹ (driver total not sourced)"


def _fit(model: ModelSpec, s: PlanSettings, mem: MemoryBreakdown, spec: GpuSpec) -> GpuFit:
    n, label = _fewest(model, s, spec)
    return GpuFit(
        spec.key,
        spec.name,
        int(spec.memory_bytes),
        mem.total_bytes <= spec.memory_bytes,
        n,
        label,
        int(spec.memory_bytes - mem.total_bytes),
        memory_source(spec),
    )


def _headline(
    model: ModelSpec,
    s: PlanSettings,
    mem: MemoryBreakdown,
    spec: GpuSpec,
    measured: dict[str, float] | None,
    work: float | None,
    cal: Calibration | None = None,
    host: dict[str, float] | None = None,
) -> tuple[TimeEstimate | None, str, bool]:
    """The time to headline on ``spec``: (estimate, layout, as asked). As asked when it fits (with ``host``, the host
    floor ``plan --probe-host`` timed for it); else the fastest layout that fits on the fewest GPUs that fit at all
    (from the asked count up); None when no layout fits, since a time for a layout that does not fit is not a time
    anyone can get."""
    if mem.total_bytes <= spec.memory_bytes:
        asked = f"{s.gpus} GPU" + ("s" if s.gpus > 1 else "") + (f" {s.shard}" if s.gpus > 1 and s.tp == 1 else "")
        return (
            estimate_time(model, s, mem, spec, measured, work, calibration=cal, host=host),
            asked + (f" tp {s.tp}" if s.tp > 1 else ""),
            True,
        )
    for n in (k for k in SEARCH_GPUS if k >= s.gpus):
        options: list[tuple[TimeEstimate, str]] = []
        for label, layout in _layouts(model, s, n):
            try:
                m = estimate_memory(model, layout)
            except PlanError:
                continue
            if m.total_bytes <= spec.memory_bytes:
                options.append((estimate_time(model, layout, m, spec, measured, work, calibration=cal), label))
        timed = [o for o in options if (o[0].step_s or o[0].total_s) is not None]
        if timed:  # fastest first; a bare --params count has no time, so its first fitting layout stands
            best = min(timed, key=lambda o: o[0].step_s or o[0].total_s or 0.0)
            return best[0], best[1], False
        if options:
            return options[0][0], options[0][1], False
    return None, "does not fit", False


def _cost(
    model: ModelSpec,
    s: PlanSettings,
    inst: Instance,
    work: float | None,
    measured: dict[str, Any] | None,
    cal: Calibration | None = None,
) -> InstanceCost:
    spec = inst.spec
    fitting: tuple[str, PlanSettings, MemoryBreakdown] | None = None
    for n in (k for k in SEARCH_GPUS if k <= inst.gpus):
        for label, layout in _layouts(model, s, n):
            try:
                m = estimate_memory(model, layout)
            except PlanError:
                continue
            if m.total_bytes <= spec.memory_bytes:
                fitting = (label, layout, m)
                break
        if fitting:
            break
    base: dict[str, Any] = {
        "instance": inst.name,
        "gpu": inst.gpu,
        "gpus": inst.gpus,
        "usd_per_hour": inst.usd_per_hour,
        "source": inst.source,
        "as_of": inst.as_of,
        "note": inst.note,
    }
    if fitting is None:
        return InstanceCost(
            **base, fits=False, layout="does not fit", time_s=None, usd=None, usd_per_million=None, tokens_per_s=None
        )
    label, layout, m = fitting
    meas = _measured_for(spec, measured)
    if s.task == "train":
        if layout.gpus < inst.gpus:  # every GPU of the instance works: the rest as data-parallel replicas
            layout = dataclasses.replace(layout, gpus=inst.gpus)
            m = estimate_memory(model, layout)
            dp = f"{layout.shard} × {layout.dp}"
            label = f"tp {layout.tp} × {dp}" if layout.tp > 1 else dp
        t = estimate_time(model, layout, m, spec, meas, work, calibration=cal)
        rate = t.tokens_per_s
        usd = None if t.total_s is None else t.total_s / 3600 * inst.usd_per_hour
        return InstanceCost(
            **base,
            fits=True,
            layout=label,
            time_s=t.total_s,
            usd=usd,
            usd_per_million=inst.usd_per_hour / 3600 / rate * 1e6 if rate else None,
            tokens_per_s=rate,
        )
    t = estimate_time(model, layout, m, spec, meas, calibration=cal)
    replicas = inst.gpus // layout.gpus
    # Serving cost uses the bandwidth bound (an optimised server): eager generate() is host-bound on every GPU.
    rate = (t.bandwidth_bound_tokens_per_s or t.tokens_per_s or 0.0) * replicas
    label = f"{label} × {replicas} replica{'s' if replicas > 1 else ''}"
    return InstanceCost(
        **base,
        fits=True,
        layout=label,
        time_s=None,
        usd=None,
        usd_per_million=inst.usd_per_hour / 3600 / rate * 1e6 if rate else None,
        tokens_per_s=rate,
    )


def _measured_for(spec: GpuSpec, measured: dict[str, Any] | None) -> dict[str, float] | None:
    """Measured ceilings apply only to the GPU they were measured on."""
    if not measured or not measured.get("device"):
        return None
    local = match_spec(str(measured["device"]))
    if local is None or local.key != spec.key:
        return None
    return {k: float(v) for k, v in measured.items() if k != "device" and isinstance(v, int | float)}


def make_plan(
    model: ModelSpec,
    s: PlanSettings,
    work: float | None = None,
    prices: Path | None = None,
    measured: dict[str, Any] | None = None,
    gpu: str | None = None,
    db: str | Path | None = None,
    calibration: Calibration | None = None,
    host: dict[str, float] | None = None,
) -> PlanResult:
    """The whole plan. ``gpu`` picks the GPU the headline time is for (default: the measured one, else H100);
    ``calibration`` (``--calibration FILE``) is used for its own GPU model, every other GPU finds its own; ``host``
    (``--probe-host``: seconds per phase, plan/probe.py) stands in for the host floor of the headline time as asked."""
    mem = estimate_memory(model, s)
    local = match_spec(str(measured["device"])) if measured and measured.get("device") else None
    time_spec = get_spec(gpu) if gpu else (local or get_spec("h100-sxm"))
    t, time_layout, as_asked = _headline(
        model, s, mem, time_spec, _measured_for(time_spec, measured), work, calibration, host
    )
    fits = [_fit(model, s, mem, spec) for spec in all_specs()]
    fits.sort(key=lambda f: (not f.fits, f.fewest_gpus or 10**6, f.memory_bytes))
    is_tf = isinstance(model, TransformerSpec)
    costs = [_cost(model, s, inst, work, measured, calibration) for inst in load_catalog(prices)]
    costs.sort(key=lambda c: (not c.fits, c.usd if c.usd is not None else (c.usd_per_million or 1e30), c.time_s or 0.0))
    notes = []
    if s.task == "train" and t is not None and t.mfu is not None:
        notes.append(f"time assumes MFU {t.mfu:.1%} of the {time_spec.name} datasheet peak ({t.ceilings_source})")
    if host:
        probed = ", ".join(f"{k.replace('_', ' ')} {v * 1e3:.1f} ms" for k, v in host.items())
        use = (
            f"stands in for the calibration's in the {time_spec.name} time"
            if as_asked
            else (f"not used: the configuration as asked does not fit on the {time_spec.name}")
        )
        notes.append(f"host floor probed on this machine ({probed}): {use}")
    comm = estimate_comm(model, s, mem, t, time_spec, db)  # plan/comm.py; None on one GPU
    notes += comm.lines() if comm else []
    return PlanResult(
        model=model.describe(),
        params=model.params,
        active_params=model.active_params,
        settings=s,
        memory=mem,
        fits=fits,
        time=t,
        time_gpu=time_spec.key,
        cost=costs,
        work=work,
        work_unit="tokens" if is_tf else "samples",
        notes=notes,
        time_layout=time_layout,
        time_as_asked=as_asked,
        communication=comm,
    )
