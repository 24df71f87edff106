"""`gpukit serve`: the trained model behind HTTP (FastAPI on uvicorn), with dynamic batching, a bounded queue,
deadlines, safe decoding, Prometheus metrics and a ``Server-Timing`` split on every response; `gpukit loadtest`,
the load generator that measures it; `gpukit deploy k8s`, the manifests that scale it out.

FastAPI and uvicorn are the ``serve`` extra and are imported only when an app is built.
"""

from __future__ import annotations

from typing import Any

from gpukit.serve.config import ServeConfig

__all__ = ["ServeConfig", "create_app"]


def create_app(model: Any, config: ServeConfig | None = None) -> Any:
    """A FastAPI app serving ``model`` (a run folder or checkpoint) in this process; see ``gpukit.serve.app``."""
    from gpukit.serve.app import create_app as _create_app

    return _create_app(model, config)
