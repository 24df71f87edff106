"""`--model-cpus`: which CPUs the model process keeps and which the HTTP workers share (gpukit.serve.cpus)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpukit.errors import ConfigError
from gpukit.serve.cpus import Split, pin_process, plan

SIXTEEN = tuple(range(16))


def test_a_count_takes_the_first_allowed_cpus_and_zero_splits_nothing():
    split = plan(4, 8, SIXTEEN)
    assert split == Split((0, 1, 2, 3), tuple(range(4, 16)))
    assert split.describe() == "model process on CPUs 0-3, HTTP processes on 4-15"
    assert plan(2, 4, (3, 5, 6, 7, 9)) == Split((3, 5), (6, 7, 9))  # the allowed CPUs (a cpuset), not 0..n
    assert Split((3, 5), (6, 7, 9)).describe() == "model process on CPUs 3,5, HTTP processes on 6-7,9"
    assert plan(15, 2, SIXTEEN) == Split(tuple(range(15)), (15,))  # the workers may share one
    assert plan(0, 8, SIXTEEN) is None
    assert plan(0, 1, None) is None  # the default asks nothing of the system


def test_the_model_s_cpus_come_first_from_the_gpu_s_numa_node():
    """Two sockets of 16 CPUs, the GPU on the second: the model process runs next to its GPU, the workers on the
    rest of both sockets; the start-up line says where."""
    cpus, second = tuple(range(32)), tuple(range(16, 32))
    split = plan(4, 8, cpus, near=second)
    assert split == Split((16, 17, 18, 19), (*range(16), *range(20, 32)), near_gpu=True)
    assert split.describe() == ("model process on CPUs 16-19 (the GPU's NUMA node), HTTP processes on 0-15,20-31")
    # the node's CPUs that this process may not use are not taken (a cpuset of 0-7 and 20-27)
    allowed = (*range(8), *range(20, 28))
    assert plan(2, 4, allowed, near=second) == Split((20, 21), (*range(8), *range(22, 28)), near_gpu=True)
    # a node smaller than the request: all of it, then the first others; not called near
    assert plan(4, 4, cpus, near=(30, 31)) == Split((30, 31, 0, 1), (*range(2, 30),))
    # one node (every CPU near the GPU), or nothing known: the first N, as without a GPU
    assert plan(4, 8, cpus, near=cpus) == plan(4, 8, cpus, near=None) == Split((0, 1, 2, 3), tuple(range(4, 32)))


def test_gpu_cpus_reads_the_gpu_s_pci_address_from_torch_and_its_node_from_sysfs(monkeypatch, tmp_path):
    import types

    from gpukit.serve import cpus as cpus_module

    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x9A, pci_device_id=0)
    seen: list[int] = []
    fake_cuda = types.SimpleNamespace(get_device_properties=lambda i: seen.append(i) or props)
    fake_torch = types.SimpleNamespace(
        cuda=fake_cuda, device=lambda d: types.SimpleNamespace(index=None if d == "cuda" else int(d[5:]))
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    asked: list[str] = []
    monkeypatch.setattr(cpus_module, "pci_local_cpus", lambda bus: asked.append(bus) or (16, 17))
    assert cpus_module.gpu_cpus("cuda") == (16, 17)
    assert cpus_module.gpu_cpus("cuda:3") == (16, 17)
    assert seen == [0, 3] and asked == ["0000:9a:00.0", "0000:9a:00.0"]
    assert cpus_module.gpu_cpus("cpu") is None  # no GPU: nothing asked
    assert seen == [0, 3]

    def no_cuda(_i: int) -> None:
        raise RuntimeError("Found no NVIDIA driver on your system")

    fake_cuda.get_device_properties = no_cuda
    assert cpus_module.gpu_cpus("cuda") is None


@pytest.mark.parametrize(
    ("requested", "workers", "cpus", "words"),
    [
        (16, 8, SIXTEEN, ["may use 16 CPUs (0-15)", "at most 15"]),
        (4, 1, SIXTEEN, ["--workers 1", "nothing to split"]),
        (2, 4, None, ["cannot pin"]),
    ],
)
def test_an_impossible_count_is_a_config_error(requested, workers, cpus, words):
    with pytest.raises(ConfigError) as info:
        plan(requested, workers, cpus)
    text = f"{info.value} hint: {info.value.hint}"
    assert info.value.hint and all(w in text for w in words), text


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_pin_process_moves_every_thread_and_what_they_start_later():
    """In a child process (pytest keeps its own CPUs): a thread running before the call moves too, a process
    started after it inherits it."""
    cpu = min(os.sched_getaffinity(0))
    code = f"""
import os, subprocess, sys, threading
from gpukit.serve.cpus import pin_process
stop = threading.Event()
early = threading.Thread(target=stop.wait)
early.start()
pin_process([{cpu}])
late = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                      capture_output=True, text=True).stdout.strip()
print(sorted(os.sched_getaffinity(early.native_id)), late)
stop.set()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [f"[{cpu}]", f"[{cpu}]"]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_pin_process_accepts_the_current_affinity_unchanged():
    mine = os.sched_getaffinity(0)
    pin_process(sorted(mine))  # this process's own set: a no-op, no error
    assert os.sched_getaffinity(0) == mine


@pytest.mark.parametrize(
    ("model_cpus", "cpus", "workers"),
    [
        (0, SIXTEEN, 8),  # one per two CPUs: what the serving records ran on 16-CPU GPU hosts
        (0, tuple(range(64)), 8),  # at most AUTO_WORKERS_MAX
        (0, (0, 1, 2, 3, 4, 5), 3),
        (0, (0, 1), 1),
        (0, (5,), 1),
        (4, SIXTEEN, 8),  # the model's CPUs leave 12: still 8
        (12, SIXTEEN, 4),  # 4 left to the workers
        (1, (0, 1), 2),  # a split needs two processes: the workers share the one CPU left
    ],
)
def test_auto_workers_is_one_per_two_cpus_at_most_eight(model_cpus, cpus, workers):
    from gpukit.serve.config import AUTO_WORKERS_MAX, auto_workers

    assert AUTO_WORKERS_MAX == 8
    assert auto_workers(model_cpus, cpus) == workers
    if model_cpus:
        assert plan(model_cpus, workers, cpus) is not None  # what auto chose is a split the plan accepts


def test_workers_left_out_is_auto_on_cuda_and_one_on_a_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path):
    from gpukit.serve import config as config_module
    from gpukit.serve.config import ServeConfig, resolve_auto

    monkeypatch.setattr(config_module, "usable_cpus", lambda: SIXTEEN)
    monkeypatch.setattr(config_module, "cpu_quota", lambda: None)  # whatever this machine's container allows

    def workers(device: str, **kw) -> int:
        return resolve_auto(ServeConfig(model=tmp_path, device=device, **kw).validate()).workers

    assert ServeConfig(model=tmp_path).workers == 0  # the default asks for the choice
    assert workers("cuda") == 8 and workers("cuda:1") == 8
    assert workers("cuda", model_cpus=12) == 4
    assert workers("cpu") == 1
    assert workers("cuda", workers=1) == 1 and workers("cuda", workers=3) == 3  # a number given is kept
    assert workers("cpu", workers=2) == 2
    monkeypatch.setattr(config_module, "_cuda", lambda device: False)  # --device auto without a GPU
    assert workers("auto") == 1
    monkeypatch.setattr(config_module, "_cuda", lambda device: True)
    assert workers("auto") == 8
    with pytest.raises(ConfigError, match="--workers must be 0"):
        ServeConfig(model=tmp_path, workers=-1).validate()


def test_a_cgroup_quota_lowers_the_auto_workers():
    """A container's CPU limit (``gpukit.hardware.cpu.cpu_quota``) lowers the count the rule starts from."""
    from gpukit.serve.config import auto_workers

    assert auto_workers(0, tuple(range(64)), 4) == 2  # a pod limited to 4 CPUs of a 64-CPU node
    assert auto_workers(0, SIXTEEN, 64) == 8 and auto_workers(0, SIXTEEN, None) == 8
    assert auto_workers(2, tuple(range(64)), 4) == 2  # a split within the limit: 2 left to the workers
