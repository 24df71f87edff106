"""`gpukit plan` as a library: the GPU memory a model needs, which GPUs fit it, how long it takes and what it costs.

    from gpukit.plan import plan

    result = plan("llama-2-7b", gpus=8, shard="fsdp", work=2_000_000_000)   # work: tokens (samples for a CNN)
    result.memory.total_bytes, [f.name for f in result.fits if f.fits], result.time, result.cost[0]

``plan`` takes a preset name (:func:`preset_names`), a Hugging Face ``config.json`` path or ``params="7B"``, and
every field of :class:`PlanSettings` as a keyword. The rest of the planner loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpukit.lazy import lazy_exports

if TYPE_CHECKING:
    from pathlib import Path

    from gpukit.plan.advisor import GpuFit, InstanceCost, PlanResult, make_plan
    from gpukit.plan.memory import MemoryBreakdown, PlanSettings
    from gpukit.plan.models import CnnSpec, ModelSpec, TransformerSpec, load_model, preset_names

_LAZY = {
    "CnnSpec": "gpukit.plan.models",
    "GpuFit": "gpukit.plan.advisor",
    "InstanceCost": "gpukit.plan.advisor",
    "MemoryBreakdown": "gpukit.plan.memory",
    "ModelSpec": "gpukit.plan.models",
    "PlanResult": "gpukit.plan.advisor",
    "PlanSettings": "gpukit.plan.memory",
    "TransformerSpec": "gpukit.plan.models",
    "load_model": "gpukit.plan.models",
    "make_plan": "gpukit.plan.advisor",
    "preset_names": "gpukit.plan.models",
}

__all__ = [
    "CnnSpec",
    "GpuFit",
    "InstanceCost",
    "MemoryBreakdown",
    "ModelSpec",
    "PlanResult",
    "PlanSettings",
    "TransformerSpec",
    "load_model",
    "make_plan",
    "plan",
    "preset_names",
]


__getattr__ = lazy_exports(__name__, _LAZY)


def plan(
    model: str | ModelSpec | None = None,
    *,
    params: str | None = None,
    work: float | None = None,
    gpu: str | None = None,
    prices: Path | None = None,
    measured: dict[str, Any] | None = None,
    **settings: Any,
) -> PlanResult:
    """The plan `gpukit plan` prints, as data: ``model`` is a preset, a config.json path or a ModelSpec (or None
    with ``params``, a bare count like "7B"); ``settings`` are :class:`PlanSettings` fields (task, recipe, batch,
    seq, gpus, shard, tp, …); ``work`` the run's tokens (samples for a CNN) for its time and cost; ``gpu`` the
    catalog key the headline time is for; ``measured`` ceilings measured on this machine (default: datasheets).
    Bad input raises :class:`gpukit.errors.PlanError` (or ConfigError) with a hint, as the CLI prints it."""
    from gpukit.plan.advisor import make_plan
    from gpukit.plan.memory import PlanSettings, default_seq
    from gpukit.plan.models import load_model

    spec = model if model is not None and not isinstance(model, str) else load_model(model, params)
    settings.setdefault("seq", default_seq(spec))
    return make_plan(spec, PlanSettings(**settings), work=work, prices=prices, measured=measured, gpu=gpu)
