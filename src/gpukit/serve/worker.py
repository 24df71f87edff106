"""One HTTP worker process of a several-process server: uvicorn on the listening socket every worker shares (a
least-connections accept, ``listen.Acceptor``), images decoded here, pixels sent down the pipe to the model
process. Started with ``spawn``; it never imports torch.

The worker watches its pipe from the start: when the model process dies (killed, out of memory) the pipe ends, every
waiting request gets 503 + Retry-After at once, /healthz and /readyz answer 503, and the worker drains and exits
with ``MODEL_GONE_EXIT`` after printing why, so that nothing is left listening for a model that is not there.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from multiprocessing.connection import Connection

from gpukit.serve.config import ServeConfig
from gpukit.serve.cpus import pin_process
from gpukit.serve.decode import warm_decoder
from gpukit.serve.listen import SharedListener
from gpukit.serve.model import ModelInfo

__all__ = ["MODEL_GONE_EXIT", "worker_main"]

MODEL_GONE_EXIT = 3


def worker_main(
    config: ServeConfig, info: ModelInfo, conn: Connection, share: SharedListener, cpus: tuple[int, ...] | None = None
) -> None:
    """``cpus``: where this process runs when the server split its CPUs (``gpukit.serve.cpus``)."""
    if cpus is not None:
        pin_process(cpus)  # first: the threads started below inherit it
    from gpukit.serve.app import build_app
    from gpukit.serve.core import Core
    from gpukit.serve.ipc import PipeClient
    from gpukit.serve.listen import Stopped, raise_open_files_limit, uvicorn_server
    from gpukit.serve.metrics import Metrics

    raise_open_files_limit()
    core = Core(config, Metrics(multiprocess=True))
    core.info = info
    warm_decoder(info.image_size)
    client = PipeClient(conn)
    core.submitter = client
    core.workers_up = lambda: share.all_up.value == 1

    def model_gone() -> None:
        core.model_gone = True
        sys.stderr.write(f"error: the model process exited; HTTP worker {share.index} stops (exit {MODEL_GONE_EXIT})\n")
        sys.stderr.flush()
        server.should_exit = True

    server = uvicorn_server(
        build_app(core, on_start=lambda: client.watch(model_gone)),
        config,
        lambda: setattr(core, "draining", True),
        share,
    )
    try:
        server.run(sockets=[share.sock])
        if not core.model_gone:
            client.send_counts(asdict(Stopped.of(core, server.connection_stats)))
    except OSError:
        pass  # the model process is gone: nobody to tell
    finally:
        share.sock.close()
        conn.close()
    if core.model_gone:
        sys.exit(MODEL_GONE_EXIT)
