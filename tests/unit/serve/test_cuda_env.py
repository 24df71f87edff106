"""The served model's process asks for 32 CUDA hardware queues before CUDA starts, unless the user chose a number."""

from __future__ import annotations

from gpukit.serve.cuda_env import CUDA_QUEUES, QUEUES_VAR, set_cuda_queues


def test_a_gpu_server_gets_32_queues_unless_the_user_chose() -> None:
    env: dict[str, str] = {}
    assert set_cuda_queues("cuda", env) == str(CUDA_QUEUES) == env[QUEUES_VAR] == "32"
    assert set_cuda_queues("auto", {}) == "32" and set_cuda_queues("cuda:1", {}) == "32"
    mine = {QUEUES_VAR: "8"}
    assert set_cuda_queues("cuda", mine) == "8" and mine == {QUEUES_VAR: "8"}  # the user's choice is kept


def test_a_cpu_server_leaves_the_environment_alone() -> None:
    env: dict[str, str] = {}
    assert set_cuda_queues("cpu", env) is None and env == {}
    assert set_cuda_queues("cpu", {QUEUES_VAR: "4"}) == "4"
