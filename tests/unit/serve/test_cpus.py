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
