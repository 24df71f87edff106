"""Multi-GPU benches without processes: busbw arithmetic, exact expected values, the hang detector, sizes, the
history glue and the report's plots, the CLI's unavailable rows and bad input."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from gpukit.bench.collectives import launch, ops
from gpukit.bench.collectives.api import default_sizes, parse_sizes
from gpukit.bench.collectives.results import CollectiveRow, P2PRow, ScalingRow, multi_run, rows_of

GiB, MiB, KiB = 2**30, 2**20, 2**10


def test_bandwidths_match_hand_arithmetic() -> None:
    # 1 GiB all-reduce in 10 ms on 8 ranks: algbw = 1,073,741,824 B / 0.01 s = 107.374 GB/s; × 2·7/8 = 187.905
    alg, bus = ops.bandwidths("allreduce", GiB, 8, 0.01)
    assert alg == pytest.approx(107.3741824)
    assert bus == pytest.approx(187.9048192)
    # all-gather / reduce-scatter / all-to-all: × (n−1)/n; 4 ranks, 64 MiB in 1 ms → 67.109 × 0.75 = 50.332
    for op in ("allgather", "reducescatter", "alltoall"):
        alg, bus = ops.bandwidths(op, 64 * MiB, 4, 0.001)
        assert alg == pytest.approx(67.108864) and bus == pytest.approx(50.331648)
    assert ops.bandwidths("broadcast", 64 * MiB, 4, 0.001)[1] == pytest.approx(67.108864)
    assert ops.bandwidths("allreduce", MiB, 1, 1e-5)[1] == 0.0  # one rank moves nothing over a bus


def test_expected_values_by_hand() -> None:
    import torch

    # m = min(8, 127 // 2) = 8: rank r holds ((i + 3r) mod 17) − 8
    assert ops.pattern(0, 2, 0, 4, "cpu", torch.int64).tolist() == [-8, -7, -6, -5]
    assert ops.pattern(1, 2, 0, 4, "cpu", torch.int64).tolist() == [-5, -4, -3, -2]
    assert ops.expected("allreduce", 0, 2, 4, "cpu", torch.float32).tolist() == [-13, -11, -9, -7]
    assert ops.expected("allgather", 1, 2, 4, "cpu", torch.float32).tolist() == [-8, -7, -5, -4]
    assert ops.expected("reducescatter", 1, 2, 4, "cpu", torch.float32).tolist() == [-9, -7]
    assert ops.expected("broadcast", 1, 2, 4, "cpu", torch.float32).tolist() == [-8, -7, -6, -5]
    assert ops.expected("alltoall", 0, 2, 4, "cpu", torch.float32).tolist() == [-8, -7, -5, -4]
    assert ops.expected("alltoall", 1, 2, 4, "cpu", torch.float32).tolist() == [-6, -5, -3, -2]


@pytest.mark.parametrize("ranks", [2, 3, 8, 64, 127])
def test_every_partial_sum_is_exact_in_bf16(ranks: int) -> None:
    import torch

    worst = sum(int(ops.pattern(r, ranks, 0, 64, "cpu", torch.int64).abs().max()) for r in range(ranks))
    assert worst <= 256  # bf16 holds every integer up to 256 exactly, so any order of additions is exact
    total = ops.expected("allreduce", 0, ranks, 64, "cpu", torch.bfloat16)
    assert torch.equal(total.to(torch.int64), ops.expected("allreduce", 0, ranks, 64, "cpu", torch.int64))


def test_sizes() -> None:
    sizes = default_sizes("cuda", quick=False)
    assert sizes[0] == KiB and sizes[-1] == GiB and len(sizes) == 21  # nccl-tests -b 1K -e 1G -f 2
    assert default_sizes("cpu", quick=True) == [KiB, 4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB]
    assert parse_sizes(["1KiB", "64MiB", "1GiB"]) == [KiB, 64 * MiB, GiB]
    assert ops.numel_for(1000, "bf16", 3) == 498  # whole elements, divisible by the ranks
    assert ops.numel_for(2, "fp32", 4) == 4  # at least one element per rank


def test_comm_factors_are_the_bench_factors() -> None:
    from gpukit.plan.comm import BUSBW_FACTORS

    for op, f in BUSBW_FACTORS.items():
        assert [f(n) for n in (1, 2, 3, 8)] == [ops.OPS[op].factor(n) for n in (1, 2, 3, 8)]


def _beat(d: Path, rank: int, beats: int, stage: str, age_s: float) -> None:
    p = d / f"hb.{rank}"
    p.write_text(f"{beats} {stage}\n")
    t = time.time() - age_s
    os.utime(p, (t, t))


def test_hang_detector_names_the_rank_behind(tmp_path: Path) -> None:
    start = time.time() - 100
    _beat(tmp_path, 0, 5, "allreduce fp32 1024 B: check", 20)
    _beat(tmp_path, 1, 4, "joined the group", 20)
    assert launch._hung(tmp_path, 2, start, 30.0) is None  # 20 s without progress < 30 s
    found = launch._hung(tmp_path, 2, start, 10.0)
    assert found is not None and found.rank == 1 and found.kind == "hung" and "joined the group" in found.reason
    _beat(tmp_path, 1, 5, "allreduce fp32 1024 B: check", 20)
    both = launch._hung(tmp_path, 2, start, 10.0)
    assert both is not None and both.rank is None and both.message().startswith("every rank hung")


def test_start_up_gets_its_allowance(tmp_path: Path) -> None:
    start = time.time() - 20  # nobody has joined yet after 20 s: slow imports, not a hang at --timeout 5
    assert launch._hung(tmp_path, 2, start, 5.0) is None
    assert launch._hung(tmp_path, 2, time.time() - launch.STARTUP_S - 1, 5.0) is not None


def _collective_run() -> Any:
    rows = [CollectiveRow("allreduce", s, "fp32", 2, "cuda", "nccl", g, check=True,
                          time_s={"median": t, "min": t, "max": t}, algbw_gbps=s / t / 1e9,
                          busbw_gbps=s / t / 1e9, iters=10, repeats=5, requested_bytes=s)
            for s, t in ((MiB, 2e-5), (64 * MiB, 2.5e-4)) for g in ("per-call", "captured")]  # fmt: skip
    rows.append(CollectiveRow("allreduce", GiB, "fp32", 2, "cuda", "nccl", status="failed", reason="rank 1 hung: x"))
    return multi_run("collectives", "2026-12-01T00:00:00+00:00", {"ops": ["allreduce"], "ranks": 2}, rows, 0.0)


def test_history_rows_and_report_plots(tmp_path: Path) -> None:
    from gpukit.bench.report import build_report, to_markdown
    from gpukit.bench.results import Run
    from gpukit.history import open_history

    db = tmp_path / "h.db"
    run = _collective_run()
    with open_history(db) as history:
        rid = history.save_run(run.to_dict())
    back = Run.from_dict(open_history(db).load_run(rid))
    assert [r.workload for r in back.results] == ["allreduce"] * 5
    assert [r.backend for r in back.results][:2] == ["nccl-x2", "nccl-x2-graph"]
    first = back.results[0]
    assert first.gbps == pytest.approx(MiB / 2e-5 / 1e9) and first.size == "1MiB:fp32" and first.check is True
    assert back.results[-1].status == "failed" and rows_of(back)[-1].reason == "rank 1 hung: x"
    assert rows_of(back) == rows_of(run) and isinstance(rows_of(back)[0], CollectiveRow)  # typed, through the store
    assert "multi_gpu" not in back.settings
    report = build_report(back)
    names = [p.name for p in report.plots]
    assert "busbw" in names and all(p.png.startswith(b"\x89PNG") for p in report.plots)
    assert "busbw.png" in to_markdown(report, "plots")


def test_p2p_and_scaling_plots() -> None:
    from gpukit.bench.report_collectives import multi_gpu_plots
    from gpukit.bench.results import Run

    p2p = [P2PRow(0, 1, "one-way", "on", "NV18", check=True, gbps=390.0, size_bytes=MiB),
           P2PRow(1, 0, "one-way", "on", "NV18", check=True, gbps=385.0, size_bytes=MiB)]  # fmt: skip
    (plot,) = multi_gpu_plots(multi_run("p2p", "t", {}, list(p2p), 0.0))
    assert plot.name == "p2p-heatmap" and plot.png.startswith(b"\x89PNG")
    rows = [ScalingRow("resnet50", n, "cuda", "nccl", images_per_s=v) for n, v in ((1, 100.0), (2, 190.0))]
    (plot,) = multi_gpu_plots(multi_run("scaling", "t", {}, list(rows), 0.0))
    assert plot.name == "scaling"
    assert multi_gpu_plots(Run("t")) == []  # an ordinary bench run: no multi-GPU plot


def test_p2p_matrix() -> None:
    from gpukit.bench.collectives.p2p import matrix

    rows = [P2PRow(0, 1, "one-way", "on", gbps=300.0), P2PRow(1, 0, "one-way", "on", gbps=290.0),
            P2PRow(0, 1, "one-way", "off", gbps=20.0), P2PRow(0, 1, "both-ways", "on", gbps=580.0)]  # fmt: skip
    assert matrix(rows) == ([0, 1], [[None, 300.0], [290.0, None]])
    assert matrix(rows, peer="off") == ([0, 1], [[None, 20.0], [None, None]])


def test_cli_unavailable_rows(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "h.db")
    res = run_cli("bench", "p2p", "--json", "--db", db)
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["rows"][0]["status"] == "unavailable" and "peer-to-peer copies need two" in doc["rows"][0]["reason"]
    res = run_cli("bench", "allreduce", "--device", "cuda", "--size", "1KiB", "--json", "--no-save")
    row = json.loads(res.stdout)["rows"][0]
    assert res.exit_code == 0 and row["status"] == "unavailable" and row["reason"] == "no CUDA GPU that torch can see"
    assert set(row) >= {"op", "size_bytes", "dtype", "ranks", "time_s", "algbw_gbps", "busbw_gbps", "graph", "check"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("allreduce", "--device", "cpu", "--dtype", "fp16"), "unsupported dtype 'fp16'"),
        (("allgather", "--device", "tpu"), "unknown device 'tpu'"),
        (("broadcast", "--device", "cpu", "--size", "big"), "bad size 'big'"),
        (("alltoall", "--device", "cpu", "--timeout", "0"), "--timeout must be positive"),
        (("scaling", "--model", "vgg16", "--device", "cpu"), "unknown model 'vgg16'"),
        (("reducescatter", "--device", "cpu", "--ranks", "0"), "--ranks must be at least 1"),
        (("allreduce", "--device", "cpu", "--model", "resnet18"), "bench allreduce does not take --model"),
        (("p2p", "--ranks", "2"), "bench p2p does not take --ranks"),
        (("scaling", "--dtype", "bf16"), "bench scaling does not take --dtype"),
        (("allreduce", "vector-add"), "bench allreduce runs alone"),
        (("vector-add", "--ranks", "2"), "--ranks belong to the multi-GPU benches"),
    ],
)
def test_cli_bad_input(run_cli, args: tuple[str, ...], message: str) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("bench", *args, "--no-save")
    assert res.exit_code == 2 and message in res.stderr and "Traceback" not in res.stderr


def test_multi_gpu_benches_are_requests_through_the_runner(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gpukit.bench.collectives.api import CollectiveRequest
    from gpukit.bench.collectives.p2p import P2PRequest
    from gpukit.bench.collectives.scaling import ScalingRequest
    from gpukit.bench.runner import execute
    from gpukit.cli.bench_multi import MultiOptions, multi_request

    req = multi_request("allreduce", MultiOptions(device="cpu", sizes=("1KiB",), ranks=2, dtypes=("bf16",)))
    assert req == CollectiveRequest(("allreduce",), "cpu", 2, (1024,), ("bf16",))
    assert multi_request("p2p", MultiOptions(sizes=("1MiB",), repeat=3)) == P2PRequest(1 << 20, 3)
    scaling = multi_request("scaling", MultiOptions(device="cpu", model="seed-cnn", max_gpus=2, quick=True))
    assert isinstance(scaling, ScalingRequest) and scaling.model == "seed-cnn" and scaling.max_ranks == 2
    monkeypatch.setattr("gpukit.bench.collectives.api.run_collectives", lambda r: _collective_run())
    run = execute(req)  # the runner's one entry point: a multi-GPU request measures itself into a Run
    assert run.settings["kind"] == "collectives" and all(isinstance(r, CollectiveRow) for r in rows_of(run))


def test_cli_help_and_plain_bench_untouched(run_cli) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("bench", "scaling", "--help")
    assert res.exit_code == 0 and "--max-gpus" in res.stdout
    res = run_cli("bench", "--help")
    assert res.exit_code == 0 and "allreduce" in res.stdout and "--sweep" in res.stdout


def test_cli_saves_renders_and_writes_markdown(run_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The CLI around a run (processes are tested in tests/integration): history, --markdown, report, exit 1."""
    from gpukit.bench.collectives import api

    monkeypatch.setattr(api, "run_collectives", lambda req: _collective_run())
    db, md = str(tmp_path / "h.db"), tmp_path / "ar.md"
    res = run_cli("bench", "allreduce", "--device", "cpu", "--json", "--db", db, "--markdown", str(md))
    assert res.exit_code == 1  # the failed 1 GiB row
    doc = json.loads(res.stdout)
    assert doc["id"] == 1 and [r["size_bytes"] for r in doc["rows"]][:2] == [MiB, MiB]
    assert "| allreduce | fp32 | 1.00 MiB | 2 | captured |" in md.read_text()
    res = run_cli("bench", "allreduce", "--device", "cpu", "--db", db)
    assert res.exit_code == 1 and "  failed: rank 1 hung: x" in res.stdout and "saved as run 2" in res.stdout
    res = run_cli("report", "--run", "1", "--db", db, "-o", str(tmp_path / "r.md"), "-f", "md", "--json")
    assert res.exit_code == 0 and "busbw" in json.loads(res.stdout)["plots"]
    res = run_cli("history", "--db", db)
    assert res.exit_code == 0 and "allreduce" in res.stdout


def test_scaling_rank_counts_and_defaults() -> None:
    from gpukit.bench.collectives.scaling import ScalingRequest, rank_counts

    assert rank_counts(1) == [1] and rank_counts(2) == [1, 2] and rank_counts(8) == [1, 2, 4, 8]
    assert rank_counts(6) == [1, 2, 4, 6]
    gpu = ScalingRequest("resnet50", "cuda")
    assert (gpu.batch, gpu.image_size, gpu.steps, gpu.repeats, gpu.per_sample, gpu.warmup) == (64, 224, 30, 5, 6, 5)
    quick = ScalingRequest("resnet18", "cuda", quick=True)
    assert (quick.steps, quick.repeats, quick.per_sample) == (10, 5, 2)
    cpu = ScalingRequest("seed-cnn", "cpu", steps_arg=2)
    assert (cpu.batch, cpu.image_size, cpu.repeats, cpu.per_sample, cpu.warmup) == (8, 64, 2, 1, 1)
