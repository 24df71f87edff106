"""`gpukit serve`: the trained model behind HTTP (FastAPI on uvicorn), with dynamic batching, a bounded queue,
deadlines, safe decoding, Prometheus metrics and a ``Server-Timing`` split on every response; `gpukit loadtest`,
the load generator that measures it; `gpukit deploy k8s`, the manifests that scale it out.

    from gpukit.serve import ServeConfig, create_app, serve, LoadSpec, run_loadtest, DeploySpec, write_deploy

FastAPI and uvicorn are the ``serve`` extra and are imported only when an app is built or served; every name but
``ServeConfig`` loads its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpukit.lazy import lazy_exports
from gpukit.serve.config import ServeConfig

if TYPE_CHECKING:
    from gpukit.serve.deploy import DeployResult, DeploySpec, manifests, size_from_loadtests, write_deploy
    from gpukit.serve.loadtest import LoadResult, LoadSpec, run_loadtest
    from gpukit.serve.model import ModelInfo, model_info
    from gpukit.serve.server import run as serve

# public name → (module, its name there)
_LAZY = {
    "DeployResult": ("gpukit.serve.deploy", "DeployResult"),
    "DeploySpec": ("gpukit.serve.deploy", "DeploySpec"),
    "LoadResult": ("gpukit.serve.loadtest", "LoadResult"),
    "LoadSpec": ("gpukit.serve.loadtest", "LoadSpec"),
    "ModelInfo": ("gpukit.serve.model", "ModelInfo"),
    "manifests": ("gpukit.serve.deploy", "manifests"),
    "model_info": ("gpukit.serve.model", "model_info"),
    "run_loadtest": ("gpukit.serve.loadtest", "run_loadtest"),
    "serve": ("gpukit.serve.server", "run"),
    "size_from_loadtests": ("gpukit.serve.deploy", "size_from_loadtests"),
    "write_deploy": ("gpukit.serve.deploy", "write_deploy"),
}

__all__ = [
    "DeployResult",
    "DeploySpec",
    "LoadResult",
    "LoadSpec",
    "ModelInfo",
    "ServeConfig",
    "create_app",
    "manifests",
    "model_info",
    "run_loadtest",
    "serve",
    "size_from_loadtests",
    "write_deploy",
]


__getattr__ = lazy_exports(__name__, _LAZY)


def create_app(model: Any, config: ServeConfig | None = None) -> Any:
    """A FastAPI app serving ``model`` (a run folder or checkpoint) in this process; see ``gpukit.serve.app``."""
    from gpukit.serve.app import create_app as _create_app

    return _create_app(model, config)
