"""The floor of the model process's two stages (issue 27): the real ``ModelRunner``'s ``prepare`` and ``execute`` of
decoded 64×64 images, run one after the other on the main thread with nothing else in the process, per batch size;
then the same with ``--busy`` Python threads beside them that hold the GIL in short bursts (as the pipe readers and
the replying thread do), at `gpukit serve`'s 0.5 ms GIL switch interval.

Over HTTP on an H100 the seed CNN's stages took 0.5-0.7 ms each at batches of 28-34 and 0.7-1.0 ms at batches of
14-19 (benchmarks/serve-onepass_h200_2026-12-05.md, call 1): a stage got slower when batches came more often. This
tells whether the stages cost that much alone (the CUDA side) or only beside the process's other threads (the GIL).

    PYTHONPATH=src python3 benchmarks/scripts/serve_stage_floor.py --json $OUT/floor.json --profile $OUT/floor-ops.txt

Printed and written per (busy threads, batch size): the median and p90 wall milliseconds of each stage, and of the
forward pass alone on the GPU (CUDA events around one replay). ``--profile``: the torch profiler's host time per op
of the main thread's batches at ``--profile-batch`` with no busy threads.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from serve_model_cpu import model_runner, write_profile  # noqa: E402  (the runner and profile table it uses)


def busy_threads(n: int, burst_s: float, pause_s: float) -> tuple[threading.Event, list[threading.Thread]]:
    """``n`` threads, each holding the GIL for ``burst_s`` of pure Python, then sleeping ``pause_s`` (GIL released)."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            end = time.perf_counter() + burst_s
            while time.perf_counter() < end:
                pass
            time.sleep(pause_s)

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return stop, threads


def stage_times(runner: Any, batch: int, iters: int, side: int) -> dict[str, float]:
    images = [np.random.default_rng(i).integers(0, 256, (3, side, side), dtype=np.uint8) for i in range(batch)]
    for _ in range(10):
        runner.execute(runner.prepare(images))
    prep, exe = [], []
    for _ in range(iters):
        t0 = time.perf_counter()
        staged = runner.prepare(images)
        t1 = time.perf_counter()
        runner.execute(staged)
        t2 = time.perf_counter()
        prep.append(t1 - t0)
        exe.append(t2 - t1)
    return {
        "prepare_ms": statistics.median(prep) * 1e3,
        "prepare_p90_ms": statistics.quantiles(prep, n=10)[-1] * 1e3,
        "execute_ms": statistics.median(exe) * 1e3,
        "execute_p90_ms": statistics.quantiles(exe, n=10)[-1] * 1e3,
        "forward_gpu_ms": forward_gpu_ms(runner, batch),
    }


def forward_gpu_ms(runner: Any, batch: int) -> float:
    """The GPU time of one forward pass of ``batch`` rows (a graph replay), median of 50, CUDA events."""
    import torch

    if not runner.cuda:
        return float("nan")
    times = []
    for _ in range(50):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(runner.exec_stream)
        runner.run_rows(batch)
        b.record(runner.exec_stream)
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def profile_ops(runner: Any, batch: int, side: int, path: Path, iters: int = 100) -> None:
    """The torch profiler's host time per op of ``iters`` batches on the main thread (``write_profile``'s table)."""
    import torch

    images = [np.zeros((3, side, side), np.uint8)] * batch
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(iters):
            runner.execute(runner.prepare(images))
    write_profile(prof, path, iters)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("seed-cnn", "resnet50"), default="seed-cnn")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batches", default="1,8,17,33,64", help="batch sizes, comma-separated")
    ap.add_argument("--busy", default="0,2,8", help="numbers of GIL-holding threads beside the stages")
    ap.add_argument("--burst-us", type=float, default=30.0, help="each busy thread's GIL burst")
    ap.add_argument("--pause-us", type=float, default=200.0, help="each busy thread's sleep between bursts")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--switch-ms", type=float, default=0.5, help="the GIL switch interval (gpukit serve: 0.5)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--profile-batch", type=int, default=33)
    args = ap.parse_args()
    side = 224 if args.model == "resnet50" else 64
    sys.setswitchinterval(args.switch_ms / 1e3)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runner = model_runner(args.model, side, 64, args.device, Path(tmp))
        if args.profile:
            profile_ops(runner, args.profile_batch, side, args.profile)
        for busy in [int(b) for b in args.busy.split(",")]:
            stop, threads = busy_threads(busy, args.burst_us / 1e6, args.pause_us / 1e6)
            try:
                for batch in [int(b) for b in args.batches.split(",")]:
                    r = {"busy": busy, "batch": batch, **stage_times(runner, batch, args.iters, side)}
                    rows.append(r)
                    print(
                        f"busy {busy} batch {batch:3d}: prepare {r['prepare_ms']:.3f} (p90 {r['prepare_p90_ms']:.3f})"
                        f" execute {r['execute_ms']:.3f} (p90 {r['execute_p90_ms']:.3f}) forward on the GPU "
                        f"{r['forward_gpu_ms']:.3f} ms",
                        flush=True,
                    )
            finally:
                stop.set()
                for t in threads:
                    t.join()
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args), "rows": rows, "python": platform.python_version()},
                                        indent=1, default=str))  # fmt: skip


if __name__ == "__main__":
    main()
