"""`gpukit deploy k8s --accept`: the Job and CronJob validate against the Kubernetes schemas and run `gpukit accept`
on every GPU node — one pod per node with all its GPUs, the store URL from a Secret, the textfile on the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")
K8S = "1.30.0"


def _write(run_cli, out: Path, *extra: str) -> dict:
    res = run_cli("deploy", "k8s", "--accept", "--image", "reg.example/gpukit:1", "--db-secret", "fleet-db",
                  "--out", str(out), *extra, "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_job_and_cronjob_validate_and_accept_every_gpu_node(run_cli, tmp_path: Path) -> None:
    out = tmp_path / "k8s"
    doc = _write(run_cli, out, "--nodes", "16", "--node-gpus", "8", "--namespace", "gpu-ops", "--schedule", "@weekly")
    assert doc["files"] == ["accept-job.yaml", "accept-cronjob.yaml", "README.md"]
    job = yaml.safe_load((out / "accept-job.yaml").read_text())
    cron = yaml.safe_load((out / "accept-cronjob.yaml").read_text())
    for obj in (job, cron):
        kubernetes_validate.validate(obj, K8S, strict=True)
        assert obj["metadata"]["namespace"] == "gpu-ops"
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 16, 16)
    assert spec["backoffLimitPerIndex"] == 0 and spec["maxFailedIndexes"] == 16
    assert cron["spec"]["schedule"] == "@weekly" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert cron["spec"]["jobTemplate"]["spec"] == spec
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == pod_labels(spec)
    (c,) = pod["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8" and c["image"] == "reg.example/gpukit:1"
    assert c["args"][:3] == ["accept", "--soak-s", "30"] and "--prom-textfile" in c["args"]
    env = {e["name"]: e for e in c["env"]}
    assert env["GPUKIT_DB"]["valueFrom"]["secretKeyRef"] == {"name": "fleet-db", "key": "url"}
    assert env["GPUKIT_NODE"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["textfile"]["hostPath"]["path"] == "/var/lib/node_exporter/textfile_collector"
    mount = next(m for m in c["volumeMounts"] if m["name"] == "textfile")
    assert c["args"][c["args"].index("--prom-textfile") + 1] == mount["mountPath"]
    assert "kubectl -n gpu-ops create secret generic fleet-db" in (out / "README.md").read_text()


def pod_labels(spec: dict) -> dict:
    return {"app.kubernetes.io/name": spec["template"]["metadata"]["labels"]["app.kubernetes.io/name"]}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ((), "--nodes"),
        (("--nodes", "0"), "bad --nodes"),
        (("--nodes", "2", "--schedule", "weekly"), "bad --schedule"),
        (("--nodes", "2", "--textfile-dir", "rel/dir"), "bad --textfile-dir"),
    ],
)
def test_bad_input_is_an_error_and_a_hint(run_cli, tmp_path: Path, extra: tuple[str, ...], needle: str) -> None:
    res = run_cli("deploy", "k8s", "--accept", "--image", "x:1", "--db-secret", "db", "--out", str(tmp_path / "o"),
                  *extra)  # fmt: skip
    err = " ".join(res.stderr.split())
    assert res.exit_code == 2 and needle in err and "hint:" in err and "Traceback" not in err
    no_secret = run_cli("deploy", "k8s", "--accept", "--image", "x:1", "--out", str(tmp_path), "--nodes", "2")
    assert no_secret.exit_code == 2 and "--db-secret" in " ".join(no_secret.stderr.split())
    no_model = run_cli("deploy", "k8s", "--image", "x:1", "--out", str(tmp_path))
    assert no_model.exit_code == 2 and "MODEL" in no_model.stderr
