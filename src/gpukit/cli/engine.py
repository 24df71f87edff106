"""``--engine`` for `gpukit serve`, `predict` and `export`: the options, the early checks, the lines that say which
engine runs and why. The engine itself is built in one place, ``gpukit.serve.choose.build_runner``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpukit.errors import ConfigError

if TYPE_CHECKING:
    from gpukit.serve.choose import EngineChoice
    from gpukit.serve.model import ModelRunner

__all__ = ["ENGINE_HELP", "GATE_HELP", "build", "check_engine", "engine_lines"]

ENGINE_HELP = (
    "auto (the fastest engine that passes the accuracy gate), eager, compile (torch.compile) or tensorrt "
    "(the torch-tensorrt extra); default: auto on CUDA (the first start builds and times each engine: minutes; the"
    " decision and compiled kernels are cached beside the checkpoint), eager on a CPU."
)
GATE_HELP = "Images for the accuracy gate (default: the run's validation split, else synthetic images)."


def check_engine(engine: str | None, device: str, gate_images: Path | None = None) -> None:
    """Refuse, before anything loads, an engine that is not one or cannot run on this device, and a gate folder that
    is not one (exit 2)."""
    if gate_images is not None and not Path(gate_images).is_dir():
        raise ConfigError(f"--gate-images {gate_images} is not a folder", hint="give a folder of images (JPEG, PNG)")
    if engine is None or engine == "auto":
        return
    from gpukit.serve.engines import ENGINES, require_engine

    if engine not in ENGINES:
        raise ConfigError(f"--engine {engine!r} is not an engine", hint=f"choose one of {', '.join(ENGINES)}")
    from gpukit.train.distributed import resolve_device

    require_engine(engine, resolve_device(device).startswith("cuda"))


def build(
    model: Path, device: str, engine: str | None, amp: str, max_batch: int, gate_images: Path | None
) -> tuple[ModelRunner, EngineChoice]:
    """The runner of ``engine`` (built, gated, chosen: ``gpukit.serve.choose``)."""
    from gpukit.serve.choose import EngineSpec, build_runner

    check_engine(engine, device, gate_images)
    if amp not in ("off", "bf16"):
        raise ConfigError("--amp must be off or bf16")
    if max_batch < 1:
        raise ConfigError("--batch-size must be at least 1")
    return build_runner(EngineSpec(Path(model), device, engine, amp, max_batch, gate_images=gate_images))


def engine_lines(choice: dict[str, Any]) -> list[str]:
    """What `gpukit serve` (and predict/export with ``--engine``) print about the engine, one fact a line."""
    where = " (decision from the cache beside the checkpoint)" if choice["cached"] else ""
    lines = [
        f"engine {choice['engine']} ({choice['precision']}); asked {choice['requested']}: {choice['reason']}; "
        f"built in {choice['build_s']:.2f} s{where}"
    ]
    gate = choice.get("gate")
    if gate:
        verdict = "passed" if gate["passed"] else "FAILED"
        lines.append(
            f"accuracy gate {verdict}: top-1 agreement with fp32 eager {gate['top1_agreement']:.2%} "
            f"(needs ≥ {gate['top1_min']:.1%}), max |Δp| {gate['max_abs_dprob']:.2g} (≤ {gate['prob_tolerance']:g}) "
            f"on {choice['gate_images']}"
        )
    for c in choice.get("candidates", ()):
        if c.get("error"):
            lines.append(f"candidate {c['engine']} failed to build: {c['error']}")
        elif c.get("build_s") is not None and c["engine"] != choice["engine"]:
            speed = f", {c['images_per_s']:,.0f} img/s" if c.get("images_per_s") else ""
            gate_state = "" if not c.get("gate") else ("; gate passed" if c["gate"]["passed"] else "; gate FAILED")
            lines.append(f"candidate {c['engine']}: built in {c['build_s']:.2f} s{speed}{gate_state}")
    lines += [f"note: {n}" for n in choice.get("notes", ())]
    return lines


def engine_option() -> Any:
    return typer.Option(None, "--engine", help=ENGINE_HELP)


def gate_option() -> Any:
    return typer.Option(None, "--gate-images", help=GATE_HELP)
