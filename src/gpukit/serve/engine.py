"""The model side of a server, set up the same way by both: ``create_app`` (one process: HTTP and model together)
and the model process of ``--workers N``. Imports torch; the HTTP workers never import this module."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpukit.serve.batcher import Batcher
from gpukit.serve.choose import EngineChoice, EngineSpec, build_runner
from gpukit.serve.config import BATCH_DECODERS, ServeConfig
from gpukit.serve.decode import warm_decoder
from gpukit.serve.metrics import Metrics
from gpukit.serve.model import ModelRunner

__all__ = ["Engine", "start_engine"]


@dataclass
class Engine:
    runner: ModelRunner
    batcher: Batcher

    def stop(self) -> None:
        self.batcher.stop()


def start_engine(
    config: ServeConfig, metrics: Metrics, on_loaded: Callable[[ModelRunner], None] | None = None
) -> Engine:
    """Load the model (safetensors), build, gate and choose its engine (``gpukit.serve.choose``; every batch size
    runs once through it), warm the decoders the configuration uses, start the batcher. ``on_loaded`` hears of the
    first runner before its warm-up."""
    spec = EngineSpec(config.model, config.device, config.engine, config.amp, config.max_batch, config.cuda_graphs,
                      config.gate_images)  # fmt: skip
    runner, choice = build_runner(spec, on_loaded)  # warmed at every padded size through the chosen engine
    runner.info = replace(runner.info, engine=choice.to_dict())
    metrics.observe_engine(choice.engine, choice.precision, _gate_state(choice), choice.build_s)
    warm_decoder(runner.info.image_size)
    if config.decode in BATCH_DECODERS:
        runner.warm_batch_decoder(config.decode)

    read_at = 0.0

    def on_batch(size: int, seconds: float) -> None:
        # the memory gauge at most once a second: torch.cuda.memory_allocated builds the allocator's whole stats
        # dictionary, and per batch it held 1-7 % of the model process's GIL samples on an H200
        # (benchmarks/json/serve-pinned_h200_2026-12-04/call3-profile-summary.md)
        nonlocal read_at
        now, memory = time.monotonic(), None
        if now - read_at >= 1.0:
            read_at, memory = now, runner.gpu_memory_bytes()
        metrics.observe_batch(size, memory, batcher.depth)

    batcher = Batcher(
        runner,
        config.max_batch,
        config.max_wait_s,
        config.queue_size,
        on_batch,
        align=runner.pass_rows,
        on_cancel=metrics.cancelled.inc,
    )
    batcher.start()
    return Engine(runner, batcher)


def _gate_state(choice: EngineChoice) -> str:
    if choice.gate is None:
        return "reference"  # fp32 eager: the gate's own reference
    return "passed" if choice.gate.passed else "failed"
