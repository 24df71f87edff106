"""The model side of a server, set up the same way by both: ``create_app`` (one process: HTTP and model together)
and the model process of ``--workers N``. Imports torch; the HTTP workers never import this module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpukit.serve.batcher import Batcher
from gpukit.serve.config import ServeConfig
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
    """Load the model (safetensors), run every batch size once (``ModelRunner.warm``), warm the decoders the
    configuration uses, start the batcher. ``on_loaded`` hears of the runner before its warm-up."""
    runner = ModelRunner(config.model, config.device, config.max_batch, config.amp, config.cuda_graphs)
    if on_loaded is not None:
        on_loaded(runner)
    runner.warm()
    warm_decoder(runner.info.image_size)
    if config.decode == "nvjpeg":
        runner.warm_batch_decoder()

    def on_batch(size: int, seconds: float) -> None:
        metrics.observe_batch(size, runner.gpu_memory_bytes(), batcher.depth)

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
