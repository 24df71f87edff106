"""`gpukit deploy k8s`: the manifests, Dockerfile and README that run `gpukit serve` on Kubernetes GPU nodes and scale
it on queue depth.

Written to ``out``: ``deployment.yaml`` (GPU limits, startup/readiness/liveness probes on /healthz and /readyz, a
``preStop`` pause plus a termination grace period that covers the drain, a non-root read-only security context),
``service.yaml``, ``hpa.yaml`` (``autoscaling/v2`` on the ``gpukit_queue_depth`` pods metric, served to the HPA by
prometheus-adapter), ``keda/scaledobject.yaml`` (the alternative: a KEDA ``ScaledObject`` with a Prometheus trigger;
apply one of the two, never both), ``Dockerfile`` with the checkpoint and gpukit copied in, and ``README.md``.
``target_rps`` sizes the replica range from a stored `gpukit loadtest` result.

GPU pods (``gpus`` ≥ 1) build on a CUDA base of the same CUDA release as the torch wheels the image installs (both
from :data:`TORCH_CUDA`); CPU pods (``gpus`` 0) build on a plain Python base with torch's CPU wheels, serve with
``--device cpu`` and request CPUs sized for CPU inference. The KEDA query's namespace is ``namespace`` when given,
else the one ``kubectl apply`` will use from here (:func:`current_namespace`).
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError

__all__ = ["DeployResult", "DeploySpec", "current_namespace", "manifests", "size_from_loadtests", "write_deploy"]

PORT = 8000
PRESTOP_S = 10  # time for the Service's endpoints to drop the pod before SIGTERM stops admissions
# The CUDA release of GPU images: torch's wheels come from its index for this release (cu130), and the base image is
# the same release, so the libraries the wheels bring and the ones the base declares to the NVIDIA runtime agree.
# (PyPI's default torch 2.14 wheel is also CUDA 13.0: ``torch.version.cuda`` reads "13.0".)
TORCH_CUDA = "13.0"
CUDA_BASE = f"nvidia/cuda:{TORCH_CUDA}.2-base-ubuntu24.04"  # the wheels carry cuBLAS/cuDNN: no runtime flavour
CPU_BASE = "python:3.12-slim"
TORCH_INDEX = "https://download.pytorch.org/whl"  # + "/cpu" or "/cu130"
# Requests per pod: a GPU pod needs host cores to decode and batch for its GPU; a CPU pod runs the model itself.
GPU_POD = ("8", "16Gi")
CPU_POD = ("4", "4Gi")
TORCH_PACKAGES = ("torch>=2.4,<=2.14.1", "torchvision>=0.19,<=0.29.1")
# gpukit's runtime needs in the image: its core dependencies and the torch + serve extras (pyproject.toml).
RUNTIME_PACKAGES = (
    "typer>=0.12,<1",
    "rich>=13,<16",
    "numpy>=1.26,<2.5",
    "nvidia-ml-py>=12.535,<14",
    "psutil>=5.9,<8",
    "matplotlib>=3.8,<4",
    "numba>=0.60,<0.70",
    "pillow>=10,<14",
    *TORCH_PACKAGES,
    "safetensors>=0.4,<1",
    "fastapi>=0.110,<1",
    "uvicorn[standard]>=0.29,<1",
    "prometheus-client>=0.20,<1",
)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$")


@dataclass
class DeploySpec:
    model: Path
    image: str
    out: Path
    name: str = "gpukit-serve"
    namespace: str | None = None
    gpus: int = 1
    min_replicas: int = 1
    max_replicas: int = 8
    target_queue: int = 32  # mean queue depth per pod the autoscaler aims for
    workers: int = 4
    max_batch: int = 64
    timeout_s: float = 10.0
    prometheus_url: str = "http://prometheus-server.monitoring.svc.cluster.local:80"
    cpu: str | None = None  # default: GPU_POD or CPU_POD
    memory: str | None = None

    @property
    def requests(self) -> tuple[str, str]:
        """(cpu, memory) each pod requests: as given, else sized for a GPU or a CPU pod."""
        cpu, memory = GPU_POD if self.gpus else CPU_POD
        return self.cpu or cpu, self.memory or memory

    def validate(self) -> DeploySpec:
        checks = [
            (bool(_NAME.match(self.name)), f"--name {self.name!r}: lower-case letters, digits and '-', at most 52"),
            (bool(self.image) and not any(c.isspace() for c in self.image), "--image must be an image reference"),
            (self.gpus >= 0, "--gpus must be 0 or more"),
            (self.min_replicas >= 1, "--min must be at least 1"),
            (self.max_replicas >= self.min_replicas, "--max must be at least --min"),
            (self.target_queue >= 1, "--target-queue must be at least 1"),
            (self.workers >= 1, "--workers must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        return self


@dataclass
class DeployResult:
    out: str
    files: list[str]
    min_replicas: int
    max_replicas: int
    sizing: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def size_from_loadtests(
    rows: Sequence[dict[str, Any]], target_rps: float, p99_ms: float, model: str | None = None
) -> dict[str, Any]:
    """Replicas for ``target_rps`` from the best stored per-replica rate whose p99 met ``p99_ms`` (and no errors)."""
    fits = []
    for row in rows:
        p99 = (row.get("latency_ms") or {}).get("p99")
        statuses = row.get("statuses") or {}
        bad = sum(v for k, v in statuses.items() if k != "200")
        if p99 is None or p99 > p99_ms or bad or not row.get("ok_rps"):
            continue
        if model and (row.get("model") or {}).get("model") not in (None, model):
            continue
        fits.append(row)
    if not fits:
        raise ConfigError(
            f"no stored load test met p99 ≤ {p99_ms:g} ms without errors",
            hint="run `gpukit loadtest URL --save` against one replica first (lower --concurrency "
            "if p99 was too high), or raise --p99-ms",
        )
    best = max(fits, key=lambda r: float(r["ok_rps"]))
    per_replica = float(best["ok_rps"])
    need = max(1, math.ceil(target_rps / per_replica))
    return {
        "target_rps": target_rps,
        "p99_ms": p99_ms,
        "per_replica_rps": per_replica,
        "loadtest_id": best.get("id"),
        "loadtest_p99_ms": best["latency_ms"]["p99"],
        "min_replicas": need,
        "max_replicas": 2 * need,
    }


def _labels(spec: DeploySpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": spec.name,
        "app.kubernetes.io/component": "inference",
        "app.kubernetes.io/managed-by": "gpukit",
    }


def _meta(spec: DeploySpec, name: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name or spec.name, "labels": _labels(spec)}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    return meta


# startup probes, × 5 s: on a GPU 10 minutes, since the default engine there (auto) compiles at a cold start (2 min
# for ResNet-50 on an H200, longer on slower GPUs and hosts; a start with the cache beside the checkpoint took 33 s:
# benchmarks/serve-engine-default_h200_2026-12-04.md); on a CPU 5 minutes (eager, nothing compiled)
STARTUP_PROBES = {"gpu": 120, "cpu": 60}


def _container(spec: DeploySpec) -> dict[str, Any]:
    args = [
        "serve",
        "/model",
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
        "--device",
        "cuda" if spec.gpus else "cpu",
        "--workers",
        str(spec.workers),
        "--max-batch",
        str(spec.max_batch),
        "--timeout-s",
        f"{spec.timeout_s:g}",
        "--quiet",
    ]
    cpu, memory = spec.requests
    limits: dict[str, str] = {"cpu": cpu, "memory": memory}
    if spec.gpus:
        limits["nvidia.com/gpu"] = str(spec.gpus)
    probe = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 2}
    return {
        "name": "server",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "TMPDIR", "value": "/tmp"}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": limits},
        # startup: time to load, build and warm the model (every padded batch size) before liveness counts
        "startupProbe": {
            **probe,
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 5,
            "failureThreshold": STARTUP_PROBES["gpu" if spec.gpus else "cpu"],
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "periodSeconds": 2,
            "timeoutSeconds": 2,
            "failureThreshold": 1,
        },
        "livenessProbe": {**probe, "failureThreshold": 3},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_S)]}}},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }


def manifests(spec: DeploySpec) -> dict[str, dict[str, Any]]:
    """File name → Kubernetes object."""
    selector = {"app.kubernetes.io/name": spec.name}
    grace = PRESTOP_S + math.ceil(spec.timeout_s) + 15  # preStop, then the longest admitted request, then margin
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(spec)],
        "volumes": [
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        ],
    }
    if spec.gpus:
        pod_spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(spec),
        "spec": {
            "replicas": spec.min_replicas,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {
                    "labels": _labels(spec),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": pod_spec,
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(spec),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(spec),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name},
            "minReplicas": spec.min_replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "gpukit_queue_depth"},
                        "target": {"type": "AverageValue", "averageValue": str(spec.target_queue)},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"stabilizationWindowSeconds": 300},
            },
        },
    }
    return {
        "deployment.yaml": deployment,
        "service.yaml": service,
        "hpa.yaml": hpa,
        "keda/scaledobject.yaml": scaled_object(spec),
    }


def current_namespace(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The namespace ``kubectl apply`` without ``-n`` uses from here, and where that was read: a pod's own (its
    service account's namespace file), else the current context's in the kubeconfig ($KUBECONFIG, else
    ~/.kube/config), else kubectl's "default"."""
    env = os.environ if environ is None else environ
    pod_ns = Path(SERVICE_ACCOUNT_NS)
    if pod_ns.is_file() and (ns := pod_ns.read_text().strip()):
        return ns, "this pod's namespace"
    paths = env.get("KUBECONFIG") or str(Path(env.get("HOME", str(Path.home()))) / ".kube" / "config")
    for path in paths.split(os.pathsep):
        if found := _kubeconfig_namespace(Path(path)):
            return found, f"the current context of {path}"
    return "default", "kubectl's default (no namespace in a kubeconfig here)"


SERVICE_ACCOUNT_NS = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _kubeconfig_namespace(path: Path) -> str | None:
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    current = doc.get("current-context")
    for entry in doc.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == current:
            ns = (entry.get("context") or {}).get("namespace")
            return str(ns) if ns else None
    return None


def query_namespace(spec: DeploySpec) -> str:
    """The namespace the KEDA query filters on: ``--namespace``, else the one the manifests will be applied in."""
    return spec.namespace or current_namespace()[0]


def scaled_object(spec: DeploySpec) -> dict[str, Any]:
    ns = query_namespace(spec)
    query = f'sum(gpukit_queue_depth{{namespace="{ns}",pod=~"{spec.name}-.*"}})'
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _meta(spec),
        "spec": {
            "scaleTargetRef": {"name": spec.name},
            "minReplicaCount": spec.min_replicas,
            "maxReplicaCount": spec.max_replicas,
            "pollingInterval": 5,
            "cooldownPeriod": 300,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": spec.prometheus_url,
                        "query": query,
                        "threshold": str(spec.target_queue),
                    },
                }
            ],
        },
    }


def dockerfile(spec: DeploySpec) -> str:
    """The image: a CUDA base and torch's CUDA wheels of the same release for GPU pods, a Python base and torch's
    CPU wheels for CPU pods (no 3 GB of CUDA libraries in an image that never uses them)."""
    torch = " ".join(f'"{p}"' for p in TORCH_PACKAGES)
    rest = " ".join(f'"{p}"' for p in RUNTIME_PACKAGES if p not in TORCH_PACKAGES)
    if spec.gpus:
        head = f"""# gpukit serve on CUDA {TORCH_CUDA} (written by `gpukit deploy k8s`). Build from this folder:
#   docker build -t {spec.image} . && docker push {spec.image}
FROM {CUDA_BASE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv"""
        index, device = f"{TORCH_INDEX}/cu{TORCH_CUDA.replace('.', '')}", "cuda"
    else:
        head = f"""# gpukit serve on CPUs (written by `gpukit deploy k8s --gpus 0`). Build from this folder:
#   docker build -t {spec.image} . && docker push {spec.image}
FROM {CPU_BASE}
RUN python3 -m venv /opt/venv"""
        index, device = f"{TORCH_INDEX}/cpu", "cpu"
    return f"""{head}
# torch from its own index first (the build this image's base matches), then the rest from PyPI
RUN /opt/venv/bin/pip install --no-cache-dir --index-url {index} {torch}
RUN /opt/venv/bin/pip install --no-cache-dir {rest}
COPY gpukit/ /opt/gpukit/gpukit/
COPY model/ /model/
ENV PATH=/opt/venv/bin:$PATH PYTHONPATH=/opt/gpukit PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
EXPOSE {PORT}
ENTRYPOINT ["python3", "-m", "gpukit"]
CMD ["serve", "/model", "--host", "0.0.0.0", "--port", "{PORT}", "--device", "{device}"]
"""


def _nodes(spec: DeploySpec) -> str:
    cpu, memory = spec.requests
    if spec.gpus:
        return (
            f"The GPU nodes need the NVIDIA device plugin (`nvidia.com/gpu`); the pods tolerate the usual "
            f"`nvidia.com/gpu` taint. Each pod requests {spec.gpus} GPU(s), {cpu} CPUs and {memory}; the image is "
            f"CUDA {TORCH_CUDA}, which needs a driver of that release or newer on the nodes."
        )
    return (
        f"CPU pods: the model runs on the pod's CPUs (`--device cpu`, torch's CPU build in the image); each pod "
        f"requests {cpu} CPUs and {memory}; any node can run them."
    )


def readme(spec: DeploySpec, sizing: dict[str, Any] | None) -> str:
    ns = f" -n {spec.namespace}" if spec.namespace else ""
    keda_ns, keda_from = query_namespace(spec), ""
    if not spec.namespace:
        keda_from = f": {current_namespace()[1]} — for another, write these again with --namespace"
    size = (
        (
            f"\nReplicas {spec.min_replicas}–{spec.max_replicas} were sized for {sizing['target_rps']:g} req/s from "
            f"load test {sizing['loadtest_id']} ({sizing['per_replica_rps']:,.0f} req/s per replica at p99 "
            f"{sizing['loadtest_p99_ms']:.1f} ms ≤ {sizing['p99_ms']:g} ms).\n"
        )
        if sizing
        else ""
    )
    return f"""# {spec.name} on Kubernetes

Written by `gpukit deploy k8s`. The image holds the model (`model/`) and gpukit (`gpukit/`); nothing is downloaded
at start and the model is read only from its safetensors file.

```bash
docker build -t {spec.image} . && docker push {spec.image}
kubectl apply{ns} -f .                       # Deployment, Service, HPA on queue depth
kubectl{ns} rollout status deployment/{spec.name}
kubectl{ns} port-forward service/{spec.name} 8000:80 &   # then: gpukit loadtest http://127.0.0.1:8000/v1/predict
```

Autoscaling: `hpa.yaml` scales on the pods metric `gpukit_queue_depth` (target {spec.target_queue} queued requests per
pod on average), which needs prometheus-adapter exposing that metric. With KEDA instead, delete the HPA and apply
`kubectl apply{ns} -f keda/` (a `ScaledObject` querying Prometheus at `{spec.prometheus_url}` for the pods in
namespace `{keda_ns}`{keda_from}); never both.
{_nodes(spec)}
Shutdown: `preStop` waits {PRESTOP_S} s for the endpoints to drop the pod, SIGTERM then stops admissions and every
admitted request is answered before exit, within the {PRESTOP_S + math.ceil(spec.timeout_s) + 15} s grace period.
{size}"""


def write_deploy(spec: DeploySpec, sizing: dict[str, Any] | None = None) -> DeployResult:
    import yaml

    from gpukit.serve.model import model_info

    spec.validate()
    info = model_info(spec.model)  # a bad model path fails before anything is written
    json_path = Path(info.source)
    out = spec.out
    (out / "keda").mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    for name, obj in manifests(spec).items():
        (out / name).write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
        files.append(name)
    (out / "Dockerfile").write_text(dockerfile(spec), encoding="utf-8")
    (out / "README.md").write_text(readme(spec, sizing), encoding="utf-8")
    model_dir = out / "model"
    model_dir.mkdir(exist_ok=True)
    import json

    tensors = json.loads(json_path.read_text())["tensors_file"]
    shutil.copy2(json_path, model_dir / "best.json")
    shutil.copy2(json_path.parent / tensors, model_dir / tensors)
    package = Path(__file__).resolve().parent.parent
    shutil.copytree(package, out / "gpukit", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    files += ["Dockerfile", "README.md", "model/", "gpukit/"]
    return DeployResult(str(out), files, spec.min_replicas, spec.max_replicas, sizing)
