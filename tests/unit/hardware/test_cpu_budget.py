"""How many CPUs this process may keep busy (gpukit.hardware.cpu): its affinity, lowered by its cgroup's CPU limit."""

from __future__ import annotations

import os

import pytest

from gpukit.hardware import cpu
from gpukit.hardware.cpu import cpu_budget, cpu_budget_of, cpu_quota, parse_cpulist, pci_local_cpus, read_cpu

SIXTEEN = tuple(range(16))


@pytest.mark.parametrize(
    ("cpus", "quota", "budget"),
    [
        (SIXTEEN, None, 16),  # no limit: the affinity's count
        (tuple(range(64)), 4, 4),  # a pod limited to 4 CPUs of a 64-CPU node runs on all 64
        (SIXTEEN, 64, 16),  # a limit above the affinity changes nothing
        ((3, 5, 9), None, 3),  # a cpuset: its count, not its highest number
        ((3, 5, 9), 1, 1),
    ],
)
def test_the_budget_is_the_affinity_lowered_by_the_quota(cpus, quota, budget):
    assert cpu_budget_of(cpus, quota) == budget


def test_without_an_affinity_the_system_s_count_is_used(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert cpu_budget_of(None, None) == 12
    assert cpu_budget_of(None, 3) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # the system cannot say either
    assert cpu_budget_of(None, None) == 1


def test_cpu_budget_reads_this_process_s_affinity_and_quota(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(cpu, "usable_cpus", lambda: tuple(range(32)))
    monkeypatch.setattr(cpu, "cpu_quota", lambda: None)
    assert cpu_budget() == 32
    monkeypatch.setattr(cpu, "cpu_quota", lambda: 6)
    assert cpu_budget() == 6
    assert read_cpu().cpus_usable == 6  # `gpukit info`'s "usable here"
    monkeypatch.setattr(cpu, "usable_cpus", lambda: None)  # not Linux
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert cpu_budget() == 4


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_usable_cpus_is_this_process_s_affinity():
    assert cpu.usable_cpus() == tuple(sorted(os.sched_getaffinity(0)))
    assert 1 <= cpu_budget() <= len(os.sched_getaffinity(0))


def test_cpu_quota_reads_cgroup_v2_and_v1(tmp_path):
    """A container's CPU limit (cgroup v2 ``cpu.max``, v1 ``cfs_quota_us``) counts, rounded up; no limit is None."""
    v2 = tmp_path / "v2"
    v2.mkdir()
    assert cpu_quota(v2) is None  # neither file: no limit known
    (v2 / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(v2) is None
    (v2 / "cpu.max").write_text("350000 100000\n")  # 3.5 CPUs
    assert cpu_quota(v2) == 4
    (v2 / "cpu.max").write_text("50000 100000\n")
    assert cpu_quota(v2) == 1
    (v2 / "cpu.max").write_text("garbage\n")
    assert cpu_quota(v2) is None
    v1 = tmp_path / "v1" / "cpu,cpuacct"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_quota(tmp_path / "v1") is None
    (v1 / "cpu.cfs_quota_us").write_text("400000\n")
    assert cpu_quota(tmp_path / "v1") == 4


def test_parse_cpulist_reads_the_kernel_s_ranges():
    assert parse_cpulist("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpulist("5") == (5,)
    assert parse_cpulist("\n") == ()
    for bad in ("3-1", "a-b", "1,,x", "-2"):
        with pytest.raises(ValueError):
            parse_cpulist(bad)


def test_pci_local_cpus_is_the_device_s_local_cpulist(tmp_path):
    dev = tmp_path / "0000:9a:00.0"
    dev.mkdir()
    (dev / "local_cpulist").write_text("16-31,48-63\n")
    assert pci_local_cpus("0000:9A:00.0", root=tmp_path) == (*range(16, 32), *range(48, 64))  # nvidia-smi's case
    assert pci_local_cpus("0000:01:00.0", root=tmp_path) is None  # no such device
    (dev / "local_cpulist").write_text("\n")
    assert pci_local_cpus("0000:9a:00.0", root=tmp_path) is None
    (dev / "local_cpulist").write_text("garbage\n")
    assert pci_local_cpus("0000:9a:00.0", root=tmp_path) is None
