"""`gpukit accept`: node acceptance in about a minute — every GPU measured by the bench engine, watched by NVML,
soaked, and judged against its model's reference, the node's other GPUs and the fleet.

Order: node identity → NVML health of every GPU → the sampler starts → each figure on every GPU at once (one
thread per GPU, the figures in the same order everywhere, so peers are measured under the same conditions) → the
soak on every GPU at once → the node checks (p2p matrix, all-reduce) → the sampler stops → NVML health again →
verdicts (``accept_judge``). A GPU that stops answering mid-run (CUDA errors, NVML no longer names it: XID 79 style)
is named in a ``faulty`` verdict and the other GPUs carry on; nothing raises past :func:`run_accept` but bad input.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from gpukit.bench.results import Result
from gpukit.errors import ConfigError
from gpukit.fleet import accept_node
from gpukit.fleet.accept_figures import (
    FigurePlan,
    Measurer,
    Target,
    cpu_plan,
    cuda_plan,
    figure_from_row,
    missing_figure,
    plausibility,
)
from gpukit.fleet.accept_judge import fleet_values, judge_acceptance
from gpukit.fleet.accept_reference import reference_for
from gpukit.fleet.record import Acceptance, Figure, GpuAcceptance, Soak
from gpukit.fleet.soak import run_soak
from gpukit.fleet.stats import Thresholds
from gpukit.fleet.telemetry import Health, Sampler, health, health_faults, nvml_index_of_pci, nvml_index_of_uuid

__all__ = ["AcceptSettings", "discover", "run_accept"]

T = TypeVar("T")
R = TypeVar("R")
# What a row's reason says when the GPU itself failed (not the figure): the rest of its figures are not attempted.
LOST_MARKERS = ("CUDA error", "cudaError", "AcceleratorError", "CUBLAS_STATUS", "GPU is lost", "device-side assert",
                "unspecified launch failure", "illegal memory access")  # fmt: skip


@dataclass(frozen=True)
class AcceptSettings:
    """One `gpukit accept` run; the CLI flags map onto these fields one to one."""

    soak_s: float = 30.0
    device: str = "cuda"  # cuda | cpu
    node: str | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    node_checks: bool = True
    cpu_mem_size: str = "64MiB"  # --device cpu: sizes a 2-core CI runner measures in seconds
    cpu_gemm_n: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise ConfigError(f"unknown device '{self.device}'", hint="use --device cuda (the default) or cpu")
        if not 3 <= self.soak_s <= 3600:
            raise ConfigError(f"bad --soak-s {self.soak_s:g}", hint="give 3 to 3600 seconds (default 30)")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(self.thresholds.to_dict())
        del out["thresholds"]
        return out


def discover(device: str) -> list[Target]:
    """The devices under test: every CUDA GPU this process sees (NVML index matched by UUID), or the CPU.
    ConfigError (exit 2) when ``device`` is cuda and there is no GPU."""
    if device == "cpu":
        from gpukit.hardware.cpu import read_cpu

        return [Target(0, None, None, None, read_cpu().model or "CPU")]
    try:
        import torch
    except ImportError:
        raise ConfigError("no GPU to accept: torch is not installed", hint="pip install 'gpukit[torch]'") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        hint = "run on a GPU node (check `gpukit doctor`), or --device cpu to test every other part"
        raise ConfigError("no CUDA GPU here to accept", hint=hint)
    out = []
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        uuid = f"GPU-{props.uuid}" if getattr(props, "uuid", None) else None
        nvml = nvml_index_of_uuid(uuid)
        pci: list[int] = [getattr(props, f"pci_{k}_id", -1) for k in ("domain", "bus", "device")]
        if nvml is None and min(pci) >= 0:  # NVML and CUDA spell the UUID differently
            nvml = nvml_index_of_pci(*pci)
        h = health(nvml) if nvml is not None else None
        out.append(Target(i, i, nvml, uuid, (h.name if h else None) or props.name, h.serial if h else None))
    return out


def _each(targets: Sequence[T], fn: Callable[[T], R]) -> list[R]:
    """``fn`` on every target at once (one thread each); in this thread when there is one (the watchdog is
    SIGALRM-based and works on the main thread only)."""
    if len(targets) == 1:
        return [fn(targets[0])]
    with ThreadPoolExecutor(len(targets), thread_name_prefix="gpukit-accept") as pool:
        return list(pool.map(fn, targets))


def _lost(row: Result) -> bool:
    return row.status == "failed" and any(m in (row.reason or "") for m in LOST_MARKERS)


@dataclass
class _State:
    """What one target collected during the run."""

    target: Target
    rows: dict[str, Result] = field(default_factory=dict)
    lost: str | None = None  # why the GPU is considered gone
    soak: Soak | None = None
    soak_row: Result | None = None


def _measure_figures(states: list[_State], plans: Sequence[FigurePlan], measurer: Measurer,
                     progress: Callable[[str], None]) -> None:  # fmt: skip
    for plan in plans:
        progress(f"{plan.name} ({plan.workload} {plan.impl} {plan.size})")

        def one(st: _State, plan: FigurePlan = plan) -> None:
            if st.lost:
                return
            row = measurer.measure(plan, st.target)
            st.rows[plan.name] = row
            if _lost(row):
                st.lost = f"{plan.name}: {row.reason}"

        _each(states, one)


def _soak_all(states: list[_State], plan: FigurePlan, gemm: str, measurer: Measurer, soak_s: float,
              sampler: Sampler | None, progress: Callable[[str], None]) -> None:  # fmt: skip
    """The soak on every live target at once; ``gemm``: the figure whose call time sizes its one-second samples."""
    progress(f"soak: {soak_s:g} s of {plan.workload} {plan.impl} {plan.size} on {len(states)} device(s) at once")

    def one(st: _State) -> None:
        if st.lost:
            return
        first = st.rows.get(gemm)
        call_s = first.kernel_median_s if first is not None and first.ok else None
        st.soak, st.soak_row = run_soak(measurer, plan, st.target, soak_s, call_s, sampler)
        if _lost(st.soak_row):
            st.lost = f"soak: {st.soak_row.reason}"

    _each(states, one)


def _gpu_record(st: _State, plans: Sequence[FigurePlan], sampler: Sampler | None, before: Health | None,
                after: Health | None) -> GpuAcceptance:  # fmt: skip
    t = st.target
    plausibility(list(st.rows.values()), t)
    figures: dict[str, Figure] = {}
    for plan in plans:
        row = st.rows.get(plan.name)
        if row is None:
            why = f"not measured: the device stopped answering earlier in the run ({st.lost})"
            figures[plan.name] = missing_figure(plan.name, why)
        else:
            figures[plan.name] = figure_from_row(plan.name, row)
    if st.soak_row is not None:
        figures["soak_gemm_tflops"] = figure_from_row("soak_gemm_tflops", st.soak_row)
    soak = st.soak or Soak(0.0, status="failed", reason=f"not run: the device stopped answering ({st.lost})")
    telemetry: dict[str, Any] = {"before": before.to_dict() if before else None,
                                 "after": after.to_dict() if after else None, "samples": [], "xids": []}  # fmt: skip
    if sampler is not None and t.nvml_index is not None:
        telemetry["samples"] = [{k: v for k, v in s.items() if k != "index"} for s in sampler.samples_of(t.nvml_index)]
        telemetry["xids"] = [x for x in sampler.xids if x.get("index") in (t.nvml_index, None)]
    return GpuAcceptance(index=t.index, uuid=t.uuid, model=t.model, serial=t.serial, figures=figures, soak=soak,
                         telemetry=telemetry)  # fmt: skip


def _faults(st: _State, before: Health | None, after: Health | None, xids: list[dict[str, Any]]) -> list[str]:
    out = health_faults(before, after, xids) if before is not None and after is not None else []
    if st.lost:
        out.insert(0, f"the device stopped answering during the run: {st.lost}")
    return out


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_accept(
    settings: AcceptSettings,
    *,
    fleet_records: Sequence[Mapping[str, Any]] | None = None,
    previous: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    measurer: Measurer | None = None,
    targets: Sequence[Target] | None = None,
) -> Acceptance:
    """Accept this node. ``fleet_records``: the newest acceptance of every node in the store (None: no store, no
    fleet comparison); ``previous``: the node's identity in its last saved run (``History.previous_identity``):
    GPUs gone, new or moved, another driver or stack are named. ``measurer`` and ``targets`` are seams for tests
    (default: the bench engine on every device found)."""
    from gpukit.hardware.identity import node_identity

    say = progress or (lambda text: None)
    t0 = time.perf_counter()
    started = _now_iso()
    node = node_identity(settings.node)
    devices = list(targets) if targets is not None else discover(settings.device)
    measurer = measurer or Measurer(seed=settings.seed)
    states = [_State(t) for t in devices]
    nvml = [t.nvml_index for t in devices if t.nvml_index is not None]
    before = {t.index: health(t.nvml_index) for t in devices if t.nvml_index is not None}
    plans = cuda_plan() if settings.device == "cuda" else cpu_plan(settings.cpu_mem_size, settings.cpu_gemm_n)
    soak_plan = FigurePlan("soak_gemm_tflops", plans[0].workload, plans[0].impl, plans[0].size)
    sampler = Sampler(nvml) if nvml else None
    node_checks: dict[str, Any] = {"p2p": None, "allreduce": None}
    if sampler is not None:
        sampler.start()
    try:
        measurer.prefetch(plans)
        _measure_figures(states, plans, measurer, say)
        _soak_all(states, soak_plan, plans[0].name, measurer, settings.soak_s, sampler, say)
        measurer.release()
        if settings.node_checks:
            node_checks = _node_checks(settings, states, say)
    finally:
        if sampler is not None:
            sampler.stop()
    after = {t.index: health(t.nvml_index) for t in devices if t.nvml_index is not None}
    acc = Acceptance(started_at=started, node=node, device=settings.device, settings=settings.to_dict(),
                     node_checks=node_checks)  # fmt: skip
    faults: dict[int, list[str]] = {}
    for st in states:
        b, a = before.get(st.target.index), after.get(st.target.index)
        acc.gpus.append(_gpu_record(st, plans, sampler, b, a))
        faults[st.target.index] = _faults(st, b, a, acc.gpus[-1].telemetry.get("xids") or [])
    _judge(acc, settings, fleet_records, previous, faults)
    acc.duration_s = round(time.perf_counter() - t0, 2)
    return acc


def _node_checks(settings: AcceptSettings, states: list[_State], say: Callable[[str], None]) -> dict[str, Any]:
    live = [s for s in states if not s.lost]
    checks: dict[str, Any] = {"p2p": None, "allreduce": None}
    if settings.device == "cuda":
        say(f"p2p matrix over {len(live)} GPU(s)")
        checks["p2p"] = accept_node.p2p_check(settings.thresholds)
    else:
        checks["p2p"] = {"status": "unavailable", "reason": "--device cpu: peer-to-peer copies are between GPUs"}
    ranks = len(live) if settings.device == "cuda" else 2
    if ranks:
        say(f"all-reduce over {ranks} rank(s)")
        checks["allreduce"] = accept_node.allreduce_check(settings.device, ranks)
    return checks


def _judge(acc: Acceptance, settings: AcceptSettings, fleet_records: Sequence[Mapping[str, Any]] | None,
           previous: Mapping[str, Any] | None, faults: Mapping[int, list[str]]) -> None:  # fmt: skip
    models = {g.model for g in acc.gpus}
    refs = {m: reference_for(m) for m in models}
    ref = next((r for r in refs.values() if r is not None), None)
    acc.reference = ref.header() if ref is not None else None
    fleet = None
    if fleet_records is not None:
        key, name = acc.node.get("stack_key"), acc.node.get("name")
        fleet = {m: fleet_values(fleet_records, m, key, name) for m in models}
    from gpukit.hardware.identity import identity_changes

    if changes := identity_changes(dict(previous) if previous else None, acc.node):
        acc.reasons.append(f"the node changed since its last saved run: {'; '.join(changes)}")
    p2p = acc.node_checks.get("p2p") or {}
    acc.reasons += list(p2p.get("flags") or [])
    judge_acceptance(acc, refs, fleet, settings.thresholds, faults)
    if p2p.get("flags") and acc.verdict == "ok":
        acc.verdict = "slow"
