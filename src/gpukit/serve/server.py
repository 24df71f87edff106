"""Running the server: one process (HTTP and model together), or N HTTP worker processes feeding one model process.

With ``--workers N`` (N > 1) this process loads the model and runs the batcher; it starts N worker processes
(``spawn``: none of them imports torch), each with its own uvicorn (uvloop + httptools when installed) on the one
listening socket this process made; a worker takes a connection only while it holds no more than the least loaded
one (``listen.Acceptor``), so connections spread evenly however few a client opens. Each worker reads bodies,
decodes images on its own threads and sends the uint8 pixels down its pipe (``ipc.py``).
SIGTERM (or Ctrl-C): stop admitting (readyz → 503, new predictions → 503), finish every admitted request (each ends
by its deadline), close idle keep-alive connections cleanly, exit 0 within ``listen.drain_s``.
An HTTP worker that dies (killed, out of memory) is replaced by a new one on a new pipe; its in-flight requests are
lost with its connections, the others' are not. More than ``MAX_RESTARTS`` deaths within ``RESTART_WINDOW_S`` is a
crash loop, not bad luck: the server then stops with an error, as it does when a worker cannot start at all.
The model process dying ends the server: every worker sees its pipe close, answers what waits with 503, and exits
(``worker.MODEL_GONE_EXIT``) within a second or two, so nothing is left half-alive (docs/serve.md).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpukit.errors import ConfigError, ServeError
from gpukit.hardware.cpu import usable_cpus
from gpukit.serve.config import ServeConfig, resolve_auto
from gpukit.serve.cpus import Split, gpu_cpus, pin_process, plan
from gpukit.serve.cuda_env import set_cuda_queues
from gpukit.serve.listen import (
    SharedListener,
    Stopped,
    drain_s,
    listen_socket,
    raise_open_files_limit,
    stop_listening,
    uvicorn_server,
)

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW_S", "Started", "Stopped", "Tick", "run"]

MAX_RESTARTS = 5  # worker deaths tolerated within RESTART_WINDOW_S
RESTART_WINDOW_S = 60.0


@dataclass
class Started:
    url: str
    model: str
    device: str
    classes: tuple[str, ...]
    image_size: int
    workers: int
    max_batch: int
    max_wait_ms: float
    queue_size: int
    api_key: str  # "on (GPUKIT_KEY)", "off", or "missing: …"
    warmup_s: float
    engine: dict[str, Any] | None = None  # ``EngineChoice.to_dict()``: the engine serving, its gate, why it won
    decode: str = "pil"  # where JPEGs are decoded (``--decode``, ``auto`` resolved)
    cpus: str = ""  # where the processes run when the server split its CPUs (``cpus.Split.describe``), else ""


@dataclass
class Tick:
    images_per_s: float
    batches_per_s: float
    mean_batch: float
    queue_depth: int
    expired: int


def _api_key_state(config: ServeConfig) -> str:
    if not config.api_key_env:
        return "off"
    if not os.environ.get(config.api_key_env):
        raise ConfigError(
            f"--api-key-env {config.api_key_env}: that environment variable is empty or unset",
            hint=f"export {config.api_key_env}=<a long random key>, or leave --api-key-env out",
        )
    return f"on (from ${config.api_key_env})"


def run(
    config: ServeConfig,
    on_started: Callable[[Started], None],
    on_tick: Callable[[Tick], None] | None,
    on_notice: Callable[[str], None] | None = None,
) -> Stopped:
    """Serve until SIGTERM/SIGINT, then drain; returns how it ended. ``on_notice`` hears of replaced workers."""
    set_cuda_queues(config.device)  # this is the model process: before CUDA starts here (gpukit.serve.cuda_env)
    config = resolve_auto(config.validate())
    key_state = _api_key_state(config)
    cpus = usable_cpus()
    split = plan(config.model_cpus, config.workers, cpus)  # an impossible one fails before any start, CUDA's too
    if split is not None:  # then the model's CPUs from the GPU's NUMA node (this starts CUDA here)
        split = plan(config.model_cpus, config.workers, cpus, gpu_cpus(config.device))
    if config.workers == 1:
        return _run_one(config, key_state, on_started, on_tick)
    return _run_many(config, key_state, on_started, on_tick, on_notice or (lambda _m: None), split)


def _ticker(stats_of: Callable[[], tuple[Any, int]], on_tick: Callable[[Tick], None] | None) -> threading.Event:
    stop = threading.Event()
    if on_tick is None:
        return stop

    def loop() -> None:
        stats, _ = stats_of()
        last = (stats.images, stats.batches, time.monotonic())
        while not stop.wait(1.0):
            stats, depth = stats_of()
            now = time.monotonic()
            images, batches, dt = stats.images - last[0], stats.batches - last[1], now - last[2]
            last = (stats.images, stats.batches, now)
            on_tick(Tick(images / dt, batches / dt, images / batches if batches else 0.0, depth, stats.expired))

    threading.Thread(target=loop, daemon=True).start()
    return stop


def _url(config: ServeConfig, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    return f"http://{host}:{port}"


def _run_one(
    config: ServeConfig, key_state: str, on_started: Callable[[Started], None], on_tick: Callable[[Tick], None] | None
) -> Stopped:
    from gpukit.serve.app import create_app
    from gpukit.serve.batcher import BatchStats

    raise_open_files_limit()
    sock = listen_socket(config.host, config.port)
    app = create_app(config.model, config)
    core = app.state.core
    server = uvicorn_server(app, config, lambda: setattr(core, "draining", True))

    def announce() -> None:  # once the model has loaded (or failed to)
        while core.info is None and core.load_error is None:
            time.sleep(0.05)
        if core.load_error is None:
            on_started(_started(config, _url(config, sock), core.info, core.device, 1, key_state, core.warmup_s))

    threading.Thread(target=announce, daemon=True).start()
    stop = _ticker(
        lambda: (
            core.submitter.stats if core.submitter else BatchStats(),
            core.submitter.depth if core.submitter else 0,
        ),
        on_tick,
    )
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        sock.close()
    if core.load_error:
        raise ServeError(f"the model could not be loaded: {core.load_error}", hint=core.load_hint)
    return Stopped.of(core, server.connection_stats)


def _started(
    config: ServeConfig,
    url: str,
    info: Any,
    device: str | None,
    workers: int,
    key_state: str,
    warmup_s: float,
    cpus: str = "",
) -> Started:
    return Started(
        url,
        info.model,
        device or config.device,
        info.classes,
        info.image_size,
        workers,
        config.max_batch,
        config.max_wait_ms,
        config.queue_size,
        key_state,
        warmup_s,
        info.engine,
        config.decode,
        cpus,
    )


def _run_many(
    config: ServeConfig,
    key_state: str,
    on_started: Callable[[Started], None],
    on_tick: Callable[[Tick], None] | None,
    on_notice: Callable[[str], None],
    split: Split | None,
) -> Stopped:
    metrics_dir = tempfile.mkdtemp(prefix="gpukit-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir  # before prometheus_client is imported, here and in workers
    sock = listen_socket(config.host, config.port)  # every HTTP worker accepts from this one
    config.port = sock.getsockname()[1]
    fleet: _Fleet | None = None
    try:
        from gpukit.serve.engine import start_engine
        from gpukit.serve.metrics import Metrics

        sys.setswitchinterval(0.0005)  # many pipe threads and one batcher here: hand the GIL over sooner than 5 ms
        engine = start_engine(config, Metrics(multiprocess=True))  # a compile at start still has every CPU
        if split is not None:
            pin_process(split.model)  # the workers started below place themselves (worker_main)
        fleet = _Fleet(config, engine, sock, split)
        stopping = _stop_on_signals()
        fleet.start()
        runner = engine.runner
        url = f"http://{config.host}:{config.port}"
        cpus = split.describe() if split else ""
        on_started(_started(config, url, runner.info, runner.device, config.workers, key_state, runner.warmup_s, cpus))
        stop_ticks = _ticker(lambda: (engine.batcher.stats, engine.batcher.depth), on_tick)
        fleet.supervise(stopping, on_notice)
        stop_ticks.set()
        stop_listening(sock)  # for every worker at once, before any of them drains: a new connection is refused
        fleet.drain(drain_s(config))
        engine.stop()
        return Stopped.total(fleet.counts)
    finally:
        if fleet is not None:
            fleet.kill()
        sock.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)


def _stop_on_signals() -> threading.Event:
    """SIGTERM/SIGINT set the event (this process then drains the workers) instead of raising."""
    stopping = threading.Event()

    def on_signal(sig: int, frame: Any) -> None:
        stopping.set()

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)
    return stopping


class _Fleet:
    """The HTTP worker processes of a several-process server, each on its own pipe to the engine's batcher."""

    def __init__(self, config: ServeConfig, engine: Any, sock: socket.socket, split: Split | None) -> None:
        import multiprocessing as mp

        from gpukit.serve.ipc import PipeHub

        self.config, self.engine, self.sock = config, engine, sock
        self.cpus = split.workers if split else None
        self.ctx = mp.get_context("spawn")
        self.open = self.ctx.RawArray("i", [-1] * config.workers)  # each worker's open connections (Acceptor)
        self.all_up = self.ctx.RawValue("b", 0)  # 1 once every worker accepted at the start: readyz may say ready
        self.procs: list[Any] = []
        self.counts: list[dict[str, int]] = []  # each worker's, as it exits
        size = engine.runner.info.image_size
        self.pipes = PipeHub(engine.batcher, (3, size, size), self.counts.append)  # one thread reads every pipe

    def start_worker(self, i: int) -> Any:
        from gpukit.serve.worker import worker_main

        parent, child = self.ctx.Pipe(duplex=True)
        share = SharedListener(self.sock, self.open, i, self.all_up)
        args = (self.config, self.engine.runner.info, child, share, self.cpus)
        proc = self.ctx.Process(target=worker_main, args=args, name=f"gpukit-http-{i}")
        proc.start()
        child.close()
        self.pipes.add(parent)  # read until the worker's end of the pipe closes
        return proc

    def start(self) -> None:
        self.procs = [self.start_worker(i) for i in range(self.config.workers)]
        _wait_listening(self.config, self.procs, self.open)
        self.all_up.value = 1

    def supervise(self, stopping: threading.Event, on_notice: Callable[[str], None]) -> None:
        """Until ``stopping``: replace a worker that died, unless they die faster than a crash loop allows."""
        deaths: list[float] = []
        while not stopping.wait(0.2):
            for i, proc in enumerate(self.procs):
                if proc.is_alive() or stopping.is_set():
                    continue
                now = time.monotonic()
                deaths = [t for t in deaths if now - t < RESTART_WINDOW_S] + [now]
                if len(deaths) > MAX_RESTARTS:
                    raise ServeError(
                        f"HTTP worker {proc.name} exited with code {proc.exitcode}, the {len(deaths)}th death "
                        f"within {RESTART_WINDOW_S:.0f} s: giving up"
                    )
                _forget_metrics(proc.pid)
                self.open[i] = -1  # its connections died with it; the new one starts from none
                self.procs[i] = self.start_worker(i)
                on_notice(f"HTTP worker {proc.name} exited with code {proc.exitcode}; started a new one")

    def drain(self, limit_s: float) -> None:
        """Each worker drains (no new admissions, every admitted request answered, idle connections closed)."""
        for proc in self.procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + limit_s
        for proc in self.procs:
            proc.join(max(0.1, deadline - time.monotonic()))

    def kill(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def _forget_metrics(pid: int | None) -> None:
    """Drop a dead worker's live gauges (in-flight) from the shared Prometheus files; its counters stay counted."""
    if pid is None:
        return
    try:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
    except Exception:  # metrics are a view; a failure here must not stop the replacement
        pass


def _wait_listening(config: ServeConfig, procs: list[Any], accepting: Any, timeout_s: float = 60.0) -> None:
    """Until every worker accepts (``accepting[i] >= 0``: else the first one up would take every early connection,
    and keep-alive ones stay where they land) and /healthz answers."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    host = "127.0.0.1" if config.host in ("0.0.0.0", "") else ("::1" if config.host == "::" else config.host)
    url = f"http://{f'[{host}]' if ':' in host else host}:{config.port}/healthz"
    while time.monotonic() < deadline:
        if any(not p.is_alive() for p in procs):
            raise ServeError("an HTTP worker exited while starting")
        if min(accepting) < 0:
            time.sleep(0.05)
            continue
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise ServeError(f"the HTTP workers did not answer {url} within {timeout_s:.0f} s")
