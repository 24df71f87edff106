"""`gpukit deploy k8s --accept`: what runs `gpukit accept` on every GPU node of a cluster, and again on a schedule.

- ``accept-job.yaml``: an **indexed Job**, one completion per node (``--nodes N``), one pod per node (required pod
  anti-affinity on the hostname), each pod taking every GPU of its node (``nvidia.com/gpu``), on GPU nodes only
  (node selector, the ``nvidia.com/gpu`` taint tolerated). ``backoffLimitPerIndex: 0``: a node whose GPUs are slow or
  faulty fails its own index (exit 1 is the verdict, not a crash to retry) and the other nodes carry on.
- ``accept-cronjob.yaml``: the same pods on a schedule, the periodic re-check (``concurrencyPolicy: Forbid``).
- ``README.md``: the Secret to create, how to apply, how node_exporter picks the metrics up.

The store's URL comes from a Secret (``--db-secret NAME``, key ``url``) as ``GPUKIT_DB``; the node's name from the
downward API (``GPUKIT_NODE``: pods have random hostnames). The metrics go to the node's textfile-collector folder,
a hostPath shared with node_exporter (``--collector.textfile.directory``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpukit.errors import ConfigError

__all__ = ["AcceptDeploySpec", "cronjob", "job", "write_accept_deploy"]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_CRON = re.compile(r"^(\S+\s+){4}\S+$|^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$")
SECRET_KEY = "url"
TEXTFILE_MOUNT = "/var/lib/gpukit/textfile"


@dataclass(frozen=True)
class AcceptDeploySpec:
    """What `gpukit deploy k8s --accept` writes; the CLI flags map onto these fields."""

    image: str
    db_secret: str
    out: Path
    nodes: int
    name: str = "gpukit-accept"
    namespace: str | None = None
    gpus_per_node: int = 8
    schedule: str = "0 4 * * 0"  # Sundays at 04:00
    soak_s: float = 30.0
    textfile_dir: str = "/var/lib/node_exporter/textfile_collector"
    node_selector: str = "nvidia.com/gpu.present=true"

    def validate(self) -> AcceptDeploySpec:
        if not self.image.strip():
            raise ConfigError("--image is empty", hint="give the image that holds gpukit (registry/name:tag)")
        for what, value in (("--name", self.name), ("--db-secret", self.db_secret)):
            if len(value) > 52 or not _NAME.match(value):
                raise ConfigError(f"bad {what} '{value}'", hint="lower-case letters, digits and '-', ≤ 52 characters")
        if self.nodes < 1:
            raise ConfigError(f"bad --nodes {self.nodes}", hint="give how many GPU nodes to accept (≥ 1)")
        if self.gpus_per_node < 1:
            raise ConfigError(f"bad --node-gpus {self.gpus_per_node}", hint="give the GPUs of one node (≥ 1)")
        if not _CRON.match(self.schedule.strip()):
            raise ConfigError(f"bad --schedule '{self.schedule}'", hint="a cron line such as '0 4 * * 0', or @weekly")
        if not self.textfile_dir.startswith("/"):
            raise ConfigError(f"bad --textfile-dir '{self.textfile_dir}'", hint="give an absolute path on the node")
        if "=" not in self.node_selector:
            raise ConfigError(f"bad --node-selector '{self.node_selector}'", hint="give KEY=VALUE")
        return self

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["out"] = str(self.out)
        return out


def _labels(spec: AcceptDeploySpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": spec.name, "app.kubernetes.io/component": "acceptance",
            "app.kubernetes.io/managed-by": "gpukit"}  # fmt: skip


def _meta(spec: AcceptDeploySpec) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": spec.name, "labels": _labels(spec)}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    return meta


def _container(spec: AcceptDeploySpec) -> dict[str, Any]:
    gpus = str(spec.gpus_per_node)
    return {
        "name": "accept",
        "image": spec.image,
        "command": ["python3", "-m", "gpukit"],
        "args": ["accept", "--soak-s", f"{spec.soak_s:g}", "--json", "--prom-textfile", TEXTFILE_MOUNT],
        "env": [
            {"name": "GPUKIT_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "GPUKIT_DB", "valueFrom": {"secretKeyRef": {"name": spec.db_secret, "key": SECRET_KEY}}},
            {"name": "HOME", "value": "/tmp"},  # the root filesystem is read-only; the JSON fallback lands here
        ],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "volumeMounts": [{"name": "textfile", "mountPath": TEXTFILE_MOUNT}, {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def _pod(spec: AcceptDeploySpec) -> dict[str, Any]:
    key, _, value = spec.node_selector.partition("=")
    match = {"labelSelector": {"matchLabels": {"app.kubernetes.io/name": spec.name}},
             "topologyKey": "kubernetes.io/hostname"}  # fmt: skip
    return {
        "metadata": {"labels": _labels(spec)},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {key: value},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [match]}},
            "containers": [_container(spec)],
            "volumes": [
                {"name": "textfile", "hostPath": {"path": spec.textfile_dir, "type": "DirectoryOrCreate"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        },
    }


def _job_spec(spec: AcceptDeploySpec) -> dict[str, Any]:
    return {
        "completionMode": "Indexed",
        "completions": spec.nodes,
        "parallelism": spec.nodes,
        "backoffLimitPerIndex": 0,  # a slow node's exit 1 is its verdict: fail that index, keep the others going
        "maxFailedIndexes": spec.nodes,
        "activeDeadlineSeconds": 3600,
        "ttlSecondsAfterFinished": 7 * 86400,
        "template": _pod(spec),
    }


def job(spec: AcceptDeploySpec) -> dict[str, Any]:
    """The indexed Job accepting every node once."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(spec), "spec": _job_spec(spec)}


def cronjob(spec: AcceptDeploySpec) -> dict[str, Any]:
    """The CronJob re-accepting every node on ``spec.schedule``."""
    meta = _meta(spec)
    meta["name"] = f"{spec.name}-recheck"
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta,
        "spec": {
            "schedule": spec.schedule,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": {"labels": _labels(spec)}, "spec": _job_spec(spec)},
        },
    }


def readme(spec: AcceptDeploySpec) -> str:
    ns = f" -n {spec.namespace}" if spec.namespace else ""
    return f"""# gpukit accept on every GPU node (written by `gpukit deploy k8s --accept`)

1. The store: a Secret holding its URL under the key `{SECRET_KEY}`:

       kubectl{ns} create secret generic {spec.db_secret} --from-literal={SECRET_KEY}='postgresql://USER:PASS@HOST/DB'

2. Accept the {spec.nodes} node(s) once, then re-check on `{spec.schedule}`:

       kubectl{ns} apply -f accept-job.yaml -f accept-cronjob.yaml
       kubectl{ns} get pods -l app.kubernetes.io/name={spec.name} -o wide

   One pod per node (anti-affinity), each taking all {spec.gpus_per_node} GPUs of its node: a node whose GPUs are
   busy is accepted when they are free. A pod that exits 1 found a slow or faulty GPU (its log is the verdict,
   `--json`); the Job marks that index failed and goes on with the others.

3. The results: `gpukit fleet status --db URL`, and node_exporter's textfile collector reads
   `{spec.textfile_dir}/gpukit_accept.prom` on each node (start node_exporter with
   `--collector.textfile.directory={spec.textfile_dir}`). Telemetry over time stays dcgm-exporter's.

The image must hold gpukit with torch (`pip install 'gpukit[torch]'`) on a CUDA runtime; `gpukit deploy k8s MODEL`
writes a Dockerfile for one.
"""


def write_accept_deploy(spec: AcceptDeploySpec) -> dict[str, Any]:
    """Write the Job, the CronJob and the README into ``spec.out``; returns what was written."""
    import yaml

    spec.validate()
    spec.out.mkdir(parents=True, exist_ok=True)
    files = {"accept-job.yaml": job(spec), "accept-cronjob.yaml": cronjob(spec)}
    for name, obj in files.items():
        (spec.out / name).write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
    (spec.out / "README.md").write_text(readme(spec), encoding="utf-8")
    return {"out": str(spec.out), "files": [*files, "README.md"], "spec": spec.to_dict()}
