"""The one place an engine is built, gated and chosen: ``build_runner(EngineSpec)`` → a warmed ``ModelRunner`` and
the ``EngineChoice`` that says why. `gpukit serve`, `gpukit predict --engine` and `gpukit export --engine` all call it.

An engine other than fp32 eager serves only after the accuracy gate (``gpukit.serve.gate``) passed. ``auto`` builds
every engine that can run here (eager and compile; tensorrt where torch_tensorrt is installed), warms each at every
padded batch size, gates each, times each one's forward pass alone at its largest padded batch size (``TIME_S`` of
samples, the median), and keeps the fastest that passed; when none but eager passes, eager serves and the reason
says why. The decision (engine, gate, speed) is cached beside the checkpoint (``gpukit.serve.engine_cache``): the
next start with the same key builds only the chosen engine, and skips gate and timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gpukit.errors import CheckFailed
from gpukit.serve import engine_cache
from gpukit.serve.engines import compile_unavailable, require_engine, tensorrt_unavailable
from gpukit.serve.gate import (
    PROB_TOL,
    TOP1_MIN,
    GateImages,
    GateResult,
    engine_probs,
    gate_images,
    judge,
    reference_probs,
)
from gpukit.serve.model import ModelRunner

__all__ = ["DEFAULT_ENGINE", "TIME_S", "Candidate", "EngineChoice", "EngineSpec", "build_runner", "choose"]

TIME_S = 0.5  # seconds of timed forward passes per candidate (after its warm-up)
# The engine when none is asked for, on every device. Not auto: compile (inductor's default mode) ran ResNet-50 bf16
# 1.52x eager at batch 256 on the H200 alone, but over HTTP it served no more (8,044 req/s against eager's
# 7,312-8,148: JPEG decoding is the slower stage there) and its first start took 107 s against 12-15 s
# (benchmarks/serve-engine_h200_2026-12-02-run2.md, serve-decode_h200_2026-12-02.md). On a CPU compile also costs
# more at start than it gains.
DEFAULT_ENGINE = "eager"


@dataclass
class EngineSpec:
    """How to build the served model; one field per flag of `gpukit serve`."""

    model: Path  # a run folder or a checkpoint's .json / .safetensors
    device: str = "auto"
    engine: str | None = None  # None: eager (compile and auto are asked for: see ``DEFAULT_ENGINE``)
    amp: str = "off"
    max_batch: int = 64
    cuda_graphs: bool = True
    gate_images: Path | None = None
    cache: bool = True


@dataclass(frozen=True)
class Candidate:
    engine: str
    build_s: float | None  # load, compile and warm-up at every padded batch size
    images_per_s: float | None  # forward pass alone at ``batch`` rows (None: not timed)
    batch: int
    gate: GateResult | None  # None: fp32 eager, the gate's own reference
    error: str | None = None  # it could not be built or run


@dataclass(frozen=True)
class EngineChoice:
    requested: str  # what was asked for (the default resolved: eager)
    engine: str
    precision: str  # fp32 or bf16
    reason: str
    gate: GateResult | None  # the chosen engine's (None: fp32 eager)
    gate_images: str | None  # where the gate's images came from, in words
    build_s: float  # wall time of this start's engine work (build, gate, timing of every candidate)
    cached: bool  # the decision came from the cache
    candidates: tuple[Candidate, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose(candidates: list[Candidate]) -> tuple[Candidate, str]:
    """The fastest candidate that was built and passed its gate, else eager; and why, in words."""
    ok = [c for c in candidates if c.error is None and (c.gate is None or c.gate.passed)]
    timed = [c for c in ok if c.images_per_s is not None]
    if timed:
        best = max(timed, key=lambda c: c.images_per_s or 0.0)
        others = ", ".join(f"{c.engine} {c.images_per_s:,.0f}" for c in timed if c is not best)
        failed = [c.engine for c in candidates if c not in ok]
        reason = f"fastest that passed the gate: {best.engine} {best.images_per_s:,.0f} img/s at batch {best.batch}"
        reason += f" (beside {others})" if others else ""
        return best, reason + (f"; failed: {', '.join(failed)}" if failed else "")
    if ok:
        return ok[0], f"{ok[0].engine}: the one engine that was built and passed"
    eager = next((c for c in candidates if c.engine == "eager" and c.error is None), None)
    if eager is None:
        raise CheckFailed("no engine could be built", hint="; ".join(f"{c.engine}: {c.error}" for c in candidates))
    why = "; ".join(f"{c.engine}: {c.error or _gate_words(c.gate)}" for c in candidates if c is not eager)
    return eager, f"fell back to eager: no other engine passed ({why or 'none other could run here'})"


def _gate_words(gate: GateResult | None) -> str:
    if gate is None:
        return "reference"
    return (f"top-1 agreement {gate.top1_agreement:.1%} (needs {gate.top1_min:.1%}), max |Δp| {gate.max_abs_dprob:.3g}"
            f" (at most {gate.prob_tolerance:g})")  # fmt: skip


def _precision(amp: str, device: str) -> str:
    return "bf16" if amp == "bf16" and device.startswith("cuda") else "fp32"


def _candidates(spec: EngineSpec, cuda: bool) -> tuple[list[str], list[str]]:
    """Engines to build, and notes on those that cannot run here."""
    if spec.engine != "auto":
        require_engine(str(spec.engine), cuda)
        return [str(spec.engine)], []
    names, notes = ["eager"], []
    for name, why in (("compile", compile_unavailable(cuda)), ("tensorrt", tensorrt_unavailable(cuda))):
        if why is None:
            names.append(name)
        else:
            notes.append(f"{name} not tried: {why}")
    return names, notes


def images_per_s(runner: ModelRunner, seconds: float = TIME_S) -> tuple[float, int]:
    """The forward pass alone at the runner's largest padded batch size: img/s (median of samples) and that size."""
    import torch

    from gpukit.bench.timing import HostClock, StopRule, measure

    rows = runner.buckets[-1]
    sync = torch.cuda.synchronize if runner.cuda else None  # the host clock reads after the device is done
    rule = StopRule(target=0.0, min_samples=3, max_samples=50, min_time_s=seconds)
    samples = measure(lambda _i: runner.run_rows(rows), HostClock(sync), warmup=2, stop=rule)
    return rows / samples.median_s, rows


def build_runner(
    spec: EngineSpec, on_loaded: Callable[[ModelRunner], None] | None = None
) -> tuple[ModelRunner, EngineChoice]:
    """The warmed runner of the chosen engine (see the module's docstring). ``on_loaded`` hears of the first runner
    built, before any warm-up. Raises ``ConfigError`` for an engine that cannot run here and ``CheckFailed`` when an
    engine asked for by name fails the gate."""
    from gpukit.serve.model import model_info
    from gpukit.train.distributed import resolve_device
    from gpukit.train.predict import resolve_checkpoint

    t0 = time.perf_counter()
    device, checkpoint = resolve_device(spec.device), resolve_checkpoint(spec.model)
    spec = replace(spec, engine=spec.engine or DEFAULT_ENGINE)
    names, notes = _candidates(spec, device.startswith("cuda"))
    precision = _precision(spec.amp, device)
    if names == ["eager"] and precision == "fp32":  # the reference itself: nothing to gate or choose
        runner = _warmed(spec, device, "eager", on_loaded)
        reason = "fp32 eager as asked (the gate's own reference: no gate)"
        return runner, EngineChoice("eager", "eager", precision, reason, None, None, _since(t0), False)
    images = gate_images(checkpoint, model_info(checkpoint).image_size, spec.gate_images)
    key = engine_cache.cache_key(checkpoint, device, engine=spec.engine, precision=precision,
                                 max_batch=spec.max_batch, cuda_graphs=spec.cuda_graphs, gate=images.digest,
                                 top1_min=TOP1_MIN, prob_tolerance=PROB_TOL)  # fmt: skip
    cached = engine_cache.read_decision(checkpoint, key) if spec.cache else None
    if cached is not None and cached.get("engine") in names:
        runner = _warmed(spec, device, str(cached["engine"]), on_loaded)
        return runner, replace(_from_dict(cached), build_s=_since(t0), cached=True, notes=tuple(notes))
    runner, choice = _build_all(spec, checkpoint, device, names, precision, images, on_loaded)
    choice = replace(choice, build_s=_since(t0), notes=tuple(notes))
    if spec.cache and (why := engine_cache.write_decision(checkpoint, key, choice.to_dict())):
        choice = replace(choice, notes=(*choice.notes, why))
    return runner, choice


def _since(t0: float) -> float:
    return time.perf_counter() - t0


def _warmed(spec: EngineSpec, device: str, engine: str, on_loaded: Callable[[ModelRunner], None] | None) -> ModelRunner:
    runner = ModelRunner(spec.model, device, spec.max_batch, spec.amp, spec.cuda_graphs, engine=engine)
    if on_loaded is not None:
        on_loaded(runner)
    runner.warm()
    return runner


def _try(
    spec: EngineSpec, device: str, name: str, images: GateImages, want: Any, timed: bool, on_loaded: Any
) -> tuple[ModelRunner, Candidate]:
    """Build, warm, gate (fp32 eager is the reference: no gate) and, when ``timed``, time one engine."""
    t0 = time.perf_counter()
    runner = _warmed(spec, device, name, on_loaded)
    precision = _precision(spec.amp, device)
    got = engine_probs(runner.run_items, images.images, runner.max_batch)
    gate = None if (name, precision) == ("eager", "fp32") else judge(name, precision, got, want, images.source)
    build_s = _since(t0)
    speed, rows = images_per_s(runner) if timed else (None, runner.buckets[-1])
    return runner, Candidate(name, build_s, speed, rows, gate)


def _build_all(
    spec: EngineSpec,
    checkpoint: Path,
    device: str,
    names: list[str],
    precision: str,
    images: GateImages,
    on_loaded: Callable[[ModelRunner], None] | None,
) -> tuple[ModelRunner, EngineChoice]:
    """Build each engine; keep the chosen one's runner. A compiler or backend failure under ``auto`` leaves the
    other engines; an engine asked for by name that fails, or fails its gate, is an error."""
    want = reference_probs(checkpoint, device, images.images)
    runners: dict[str, ModelRunner] = {}
    candidates = []
    for name in names:
        try:
            runner, candidate = _try(spec, device, name, images, want, len(names) > 1, on_loaded)
        except Exception as exc:
            if len(names) == 1:
                raise
            candidates.append(Candidate(name, None, None, 0, None, f"{type(exc).__name__}: {exc}"))
            continue
        on_loaded = None  # told once, of the first runner
        runners[name] = runner
        candidates.append(candidate)
    if len(names) == 1:  # asked for by name: it serves, or nothing does
        best, reason = candidates[0], f"{candidates[0].engine} as asked, gate passed"
        if best.gate is not None and not best.gate.passed:
            raise CheckFailed(
                f"--engine {best.engine} ({precision}) failed the accuracy gate on {images.detail}: "
                f"{_gate_words(best.gate)}",
                hint="serve with --engine eager, or --engine auto (it falls back to eager)",
            )
    else:
        best, reason = choose(candidates)
    runner = runners.pop(best.engine)
    runners.clear()  # the other candidates' graphs and buffers go now, not with the process
    choice = EngineChoice(str(spec.engine), best.engine, precision, reason, best.gate, images.detail, 0.0, False,
                          tuple(candidates))  # fmt: skip
    return runner, choice


def _from_dict(d: dict[str, Any]) -> EngineChoice:
    """An ``EngineChoice`` as the cache stored it (``to_dict``)."""

    def gate(g: Any) -> GateResult | None:
        return GateResult(**g) if isinstance(g, dict) else None

    candidates = tuple(Candidate(**{**c, "gate": gate(c.get("gate"))}) for c in d.get("candidates", ()))
    fields = {**d, "gate": gate(d.get("gate")), "candidates": candidates, "notes": tuple(d.get("notes", ()))}
    return EngineChoice(**fields)
