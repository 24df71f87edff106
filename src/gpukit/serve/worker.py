"""One HTTP worker process of a several-process server: uvicorn on its own SO_REUSEPORT socket, images decoded
here, pixels sent down the pipe to the model process. Started with ``spawn``; it never imports torch."""

from __future__ import annotations

from multiprocessing.connection import Connection

from gpukit.serve.config import ServeConfig
from gpukit.serve.decode import warm_decoder
from gpukit.serve.model import ModelInfo

__all__ = ["worker_main"]


def worker_main(config: ServeConfig, info: ModelInfo, conn: Connection, index: int) -> None:
    from gpukit.serve.app import build_app
    from gpukit.serve.core import Core
    from gpukit.serve.ipc import PipeClient
    from gpukit.serve.metrics import Metrics
    from gpukit.serve.server import listen_socket, uvicorn_server

    core = Core(config, Metrics(multiprocess=True))
    core.info = info
    warm_decoder(info.image_size)
    core.submitter = PipeClient(conn)
    sock = listen_socket(config.host, config.port, reuse_port=True)
    server = uvicorn_server(build_app(core), config, lambda: setattr(core, "draining", True))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        conn.close()
