"""The multi-GPU benches with real processes on the CPU (gloo): 2 and 4 ranks, every op and dtype checked exactly,
a wrong reduction caught, a hung and a dead rank reported with no process left behind, DDP scaling on 1 and 2
ranks, and the CLI end to end into the history and the report. Small sizes: the whole file runs in about a minute."""

from __future__ import annotations

import os
import time

import pytest

from gpukit.bench.collectives.api import CollectiveRequest, run_collectives
from gpukit.bench.collectives.launch import launch
from gpukit.bench.collectives.ops import OPS
from gpukit.bench.collectives.results import rows_of

ALL_OPS = tuple(OPS)
KiB = 1024


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        for probe in (os.kill, os.killpg):  # the rank itself, and anything left in its process group
            try:
                probe(pid, 0)
                return False
            except ProcessLookupError:
                pass
            except PermissionError:  # pid reused by another user's process: not ours
                pass
    return True


def _req(ranks: int, sizes: tuple[int, ...], **kw: object) -> CollectiveRequest:
    return CollectiveRequest(ALL_OPS, "cpu", ranks, sizes, ("fp32", "bf16"), quick=True, repeats=2, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("ranks", "sizes"), [(2, (KiB, 64 * KiB)), (4, (4 * KiB,))])
def test_every_op_and_dtype_is_right(ranks: int, sizes: tuple[int, ...]) -> None:
    run = run_collectives(_req(ranks, sizes))
    assert run.settings["failure"] is None
    assert len(rows_of(run)) == len(ALL_OPS) * 2 * len(sizes)
    assert {(r.op, r.dtype) for r in rows_of(run)} == {(op, d) for op in ALL_OPS for d in ("fp32", "bf16")}
    for r in rows_of(run):
        assert r.status == "ok" and r.check is True and r.ranks == ranks and r.backend == "gloo"
        assert r.graph == "per-call"  # no CUDA graph on the CPU
        assert r.time_s is not None and 0 < r.time_s["min"] <= r.time_s["median"] <= r.time_s["max"]
        assert r.algbw_gbps == pytest.approx(r.size_bytes / r.time_s["median"] / 1e9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * OPS[r.op].factor(ranks))


def test_a_wrong_reduction_fails_its_row() -> None:
    req = CollectiveRequest(ALL_OPS, "cpu", 2, (KiB,), ("bf16",), quick=True, repeats=1)
    result = launch(_job(req), 2, 60, env={"GPUKIT_TEST_CORRUPT_RANK": "1"})
    assert result.failure is None and len(result.rows) == len(ALL_OPS)
    by = {r["op"]: r for r in result.rows}
    for op in ("allreduce", "allgather", "reducescatter", "alltoall"):  # rank 1's element 0 reaches some output
        r = by[op]
        assert r["status"] == "failed" and r["check"] is False and r["time_s"] is None and r["busbw_gbps"] is None
        assert r["reason"].startswith("wrong result on rank(s)")
    assert by["allreduce"]["reason"].startswith("wrong result on rank(s) 0, 1:")  # the sum is wrong everywhere
    assert by["reducescatter"]["reason"].startswith("wrong result on rank(s) 0:")  # element 0 is rank 0's chunk
    # broadcast overwrites rank 1's buffer with rank 0's: that row is right, so the check is not failing blindly
    assert by["broadcast"]["status"] == "ok" and by["broadcast"]["check"] is True


def _job(req: CollectiveRequest) -> dict[str, object]:
    from gpukit.bench.collectives.api import _job as job

    return job(req, list(req.sizes))


def test_a_hung_rank_times_out_and_nothing_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpukit.bench.collectives import api

    seen = []

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(launch(*args, **kwargs))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(api, "launch", spy)
    monkeypatch.setenv("GPUKIT_TEST_HANG_RANK", "1")
    t0 = time.perf_counter()
    run = run_collectives(CollectiveRequest(("allreduce",), "cpu", 2, (KiB, 2 * KiB), ("fp32",), timeout_s=3.0))
    took = time.perf_counter() - t0
    assert run.settings["failure"] is not None and run.settings["failure"].startswith(
        "rank 1 hung: no progress for 3 s (--timeout)"
    )
    assert "joined the group" in run.settings["failure"]  # the stage rank 1 was last seen in
    assert [r.status for r in rows_of(run)] == ["failed", "failed"] and "rank 1 hung" in (rows_of(run)[0].reason or "")
    assert took < 60  # start-up + 3 s + clean-up, not forever
    assert len(seen[0].pids) == 2 and _gone(seen[0].pids)


def test_a_dead_rank_is_reported_and_reaped() -> None:
    req = CollectiveRequest(("allgather",), "cpu", 2, (KiB,), ("fp32",), quick=True)
    result = launch(_job(req), 2, 60, env={"GPUKIT_TEST_DIE_RANK": "1"})
    assert result.failure is not None and result.failure.rank == 1 and result.failure.kind == "died"
    assert result.failure.reason.startswith("exited with status 3")
    assert _gone(result.pids)


def test_scaling_on_one_and_two_cpu_ranks() -> None:
    from gpukit.bench.collectives.scaling import ScalingRequest, run_scaling

    run = run_scaling(ScalingRequest("seed-cnn", "cpu", 2, batch_arg=4, image_size_arg=16, steps_arg=2, timeout_s=120))
    assert run.settings["failure"] is None and [r.ranks for r in rows_of(run)] == [1, 2]
    one, two = rows_of(run)
    assert one.ok and two.ok and one.check and two.check and two.backend == "gloo"
    assert one.images_per_s == pytest.approx(4 / one.step_s["median"])
    assert two.images_per_s == pytest.approx(2 * 4 / two.step_s["median"])
    assert one.efficiency == pytest.approx(1.0)
    assert two.efficiency == pytest.approx(two.images_per_s / (2 * one.images_per_s))
