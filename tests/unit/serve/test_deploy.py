"""`gpukit deploy k8s`: the core objects validate against the Kubernetes schemas, the KEDA ScaledObject field by field,
the probes and drain timing line up with the server, and --target-rps sizes replicas from stored load tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from serve_testdata import make_checkpoint

from gpukit.serve import deploy
from gpukit.serve._store import open_history
from gpukit.serve.deploy import PRESTOP_S, TORCH_CUDA, DeploySpec, size_from_loadtests

kubernetes_validate = pytest.importorskip("kubernetes_validate")
K8S = "1.30.0"


@pytest.fixture(autouse=True)
def _no_cluster(monkeypatch, tmp_path):
    """No kubeconfig and not in a pod: kubectl's own default namespace applies."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setattr(deploy, "SERVICE_ACCOUNT_NS", str(tmp_path / "no-service-account"))


@pytest.fixture
def model(tmp_path: Path) -> Path:
    pytest.importorskip("torch")
    return make_checkpoint(tmp_path / "run")


def _write(run_cli, model: Path, out: Path, *extra: str) -> dict:
    res = run_cli(
        "deploy", "k8s", str(model), "--image", "registry.example/gpukit:1", "--out", str(out), *extra, "--json"
    )
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_manifests_validate_against_the_kubernetes_schemas(run_cli, model, tmp_path):
    out = tmp_path / "k8s"
    doc = _write(run_cli, model, out, "--gpus", "2", "--min", "2", "--max", "6", "--namespace", "ml")
    assert (doc["min_replicas"], doc["max_replicas"]) == (2, 6)
    objects = {
        name: yaml.safe_load((out / name).read_text()) for name in ("deployment.yaml", "service.yaml", "hpa.yaml")
    }
    for name, obj in objects.items():
        kubernetes_validate.validate(obj, K8S, strict=True)  # raises on any unknown or mistyped field
        assert obj["metadata"]["namespace"] == "ml", name
    dep = objects["deployment.yaml"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] == 10 * 60  # auto compiles
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(PRESTOP_S)]
    timeout = float(c["args"][c["args"].index("--timeout-s") + 1])
    assert pod["terminationGracePeriodSeconds"] >= PRESTOP_S + timeout + 5  # the drain fits in the grace period
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] != 0 and not sc["allowPrivilegeEscalation"]
    assert sc["readOnlyRootFilesystem"] and sc["capabilities"]["drop"] == ["ALL"]
    assert c["args"][:2] == ["serve", "/model"] and "0.0.0.0" in c["args"]
    svc = objects["service.yaml"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["targetPort"] == c["ports"][0]["name"]
    hpa = objects["hpa.yaml"]
    assert hpa["apiVersion"] == "autoscaling/v2" and (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gpukit-serve"}
    (m,) = hpa["spec"]["metrics"]
    assert m["pods"]["metric"]["name"] == "gpukit_queue_depth" and m["pods"]["target"]["averageValue"] == "32"
    # the image is self-contained: checkpoint pair and gpukit copied, a CUDA base (torch's wheels bring the CUDA
    # libraries), a non-root user
    assert (out / "model" / "best.json").is_file() and (out / "model" / "best.safetensors").is_file()
    assert (out / "gpukit" / "serve" / "app.py").is_file()
    docker = (out / "Dockerfile").read_text()
    assert docker.splitlines()[2].startswith("FROM nvidia/cuda:") and "-base-" in docker and "USER 10001" in docker
    assert "kubectl apply -n ml -f ." in (out / "README.md").read_text()


def test_keda_scaled_object_field_by_field(run_cli, model, tmp_path):
    out = tmp_path / "k8s"
    _write(
        run_cli,
        model,
        out,
        "--min",
        "1",
        "--max",
        "5",
        "--target-queue",
        "16",
        "--name",
        "cats",
        "--prometheus-url",
        "http://prom.monitoring:9090",
    )
    obj = yaml.safe_load((out / "keda" / "scaledobject.yaml").read_text())
    assert obj["apiVersion"] == "keda.sh/v1alpha1" and obj["kind"] == "ScaledObject"
    assert obj["metadata"]["name"] == "cats"
    spec = obj["spec"]
    assert spec["scaleTargetRef"] == {"name": "cats"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 5)
    assert isinstance(spec["pollingInterval"], int) and isinstance(spec["cooldownPeriod"], int)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus"
    meta = trigger["metadata"]
    assert set(meta) == {"serverAddress", "query", "threshold"}
    assert meta["serverAddress"] == "http://prom.monitoring:9090"
    assert meta["query"] == 'sum(gpukit_queue_depth{namespace="default",pod=~"cats-.*"})'
    assert meta["threshold"] == "16"  # KEDA wants strings in trigger metadata


def _row(ok_rps: float, p99: float, statuses: dict | None = None, model: str = "seed-cnn") -> dict:
    return {
        "url": "http://127.0.0.1:8000/v1/predict",
        "ok_rps": ok_rps,
        "latency_ms": {"p99": p99},
        "statuses": statuses or {"200": 100},
        "model": {"model": model},
    }


def test_target_rps_sizing_uses_the_best_result_that_met_the_p99():
    rows = [
        _row(900, 150),
        _row(600, 80),
        _row(700, 90, {"200": 90, "503": 10}),
        _row(5000, 10, model="resnet50"),
        _row(400, 40),
    ]
    sizing = size_from_loadtests(rows, target_rps=2500, p99_ms=100, model="seed-cnn")
    assert sizing["per_replica_rps"] == 600  # 900 missed the p99, 700 had 503s, 5000 is another model
    assert (sizing["min_replicas"], sizing["max_replicas"]) == (5, 10)  # ceil(2500 / 600) = 5
    from gpukit.errors import ConfigError

    with pytest.raises(ConfigError, match="p99"):
        size_from_loadtests(rows, 100, p99_ms=5)


def test_deploy_target_rps_reads_the_stored_loadtests(run_cli, model, tmp_path):
    db = tmp_path / "results.db"
    history = open_history(db)
    history.save_loadtest(_row(250, 50))
    rid = history.save_loadtest(_row(300, 60))
    assert [r["id"] for r in history.loadtests()] == [rid, rid - 1]  # newest first
    doc = _write(run_cli, model, tmp_path / "k8s", "--target-rps", "1000", "--db", str(db))
    assert doc["sizing"]["loadtest_id"] == rid and (doc["min_replicas"], doc["max_replicas"]) == (4, 8)
    assert "sized for 1000 req/s from load test" in (tmp_path / "k8s" / "README.md").read_text()


def test_bad_deploy_input_is_a_clear_error(run_cli, tmp_path):
    res = run_cli("deploy", "k8s", str(tmp_path / "nope"), "--image", "x:1", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "error:" in res.stderr and "Traceback" not in res.stderr
    with pytest.raises(Exception, match="--max"):
        DeploySpec(model=tmp_path, image="x:1", out=tmp_path, min_replicas=3, max_replicas=2).validate()


def test_cpu_pods_get_a_cpu_image_and_no_gpu_text(run_cli, model, tmp_path):
    out = tmp_path / "cpu"
    _write(run_cli, model, out, "--gpus", "0")
    dockerfile = (out / "Dockerfile").read_text()
    assert "nvidia/cuda" not in dockerfile and f"FROM {deploy.CPU_BASE}" in dockerfile
    assert "--index-url https://download.pytorch.org/whl/cpu" in dockerfile  # torch's CPU wheels, no CUDA libraries
    assert dockerfile.rstrip().endswith('"--device", "cpu"]')
    readme = (out / "README.md").read_text()
    assert "nvidia.com/gpu" not in readme and "CPU pods" in readme
    dep = yaml.safe_load((out / "deployment.yaml").read_text())
    kubernetes_validate.validate(dep, K8S, strict=True)
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "tolerations" not in pod and "nvidia.com/gpu" not in c["resources"]["limits"]
    assert c["args"][c["args"].index("--device") + 1] == "cpu"
    assert c["resources"]["requests"] == {"cpu": "4", "memory": "4Gi"}  # sized for CPU inference, not 8 / 16Gi
    assert c["startupProbe"]["failureThreshold"] * c["startupProbe"]["periodSeconds"] == 5 * 60  # eager: no compile
    assert "requests 4 CPUs and 4Gi" in readme


def test_gpu_image_matches_the_torch_build_it_installs(run_cli, model, tmp_path):
    out = tmp_path / "gpu"
    _write(run_cli, model, out)
    dockerfile = (out / "Dockerfile").read_text()
    base = next(line for line in dockerfile.splitlines() if line.startswith("FROM "))
    index = next(line for line in dockerfile.splitlines() if "--index-url" in line)
    cuda = TORCH_CUDA.replace(".", "")
    assert base.startswith(f"FROM nvidia/cuda:{TORCH_CUDA}.") and f"/whl/cu{cuda} " in index  # one CUDA release
    assert '"--device", "cuda"]' in dockerfile
    assert "nvidia.com/gpu" in (out / "README.md").read_text()
    c = yaml.safe_load((out / "deployment.yaml").read_text())["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "8", "memory": "16Gi"}


def test_the_image_installs_the_torch_the_project_pins():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    torch_extra = pyproject["project"]["optional-dependencies"]["torch"]
    assert set(deploy.TORCH_PACKAGES) <= set(torch_extra)
    torch = pytest.importorskip("torch")
    if torch.version.cuda:  # the wheel this machine installed from PyPI: the image's CUDA release is the same
        assert torch.version.cuda == TORCH_CUDA


def _query(out: Path) -> str:
    obj = yaml.safe_load((out / "keda" / "scaledobject.yaml").read_text())
    return obj["spec"]["triggers"][0]["metadata"]["query"]


def test_keda_namespace_follows_namespace_option_or_kubectl(run_cli, model, tmp_path, monkeypatch):
    _write(run_cli, model, tmp_path / "a", "--namespace", "ml")
    assert 'namespace="ml"' in _query(tmp_path / "a")
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "current-context": "work",
        "contexts": [{"name": "other", "context": {"namespace": "x"}},
                     {"name": "work", "context": {"cluster": "c", "namespace": "team-vision"}}],
    }))  # fmt: skip
    monkeypatch.setenv("KUBECONFIG", str(config))
    _write(run_cli, model, tmp_path / "b")
    assert 'namespace="team-vision"' in _query(tmp_path / "b")
    assert "team-vision" in (tmp_path / "b" / "README.md").read_text()
    pod_ns = tmp_path / "sa-namespace"
    pod_ns.write_text("serving\n")
    monkeypatch.setattr(deploy, "SERVICE_ACCOUNT_NS", str(pod_ns))  # run inside a pod: its own namespace
    _write(run_cli, model, tmp_path / "c")
    assert 'namespace="serving"' in _query(tmp_path / "c")


def test_docs_name_the_images_deploy_writes():
    doc = (Path(__file__).resolve().parents[3] / "docs" / "serve.md").read_text()
    assert deploy.CUDA_BASE in doc and deploy.CPU_BASE in doc
