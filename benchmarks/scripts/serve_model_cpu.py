"""CPU microseconds the model process of `gpukit serve` spends per request outside the model itself: reading the
workers' pipes, batching, preparing, replying (issue 27: on an H200 the seed CNN's model process spent 1.1 cores
at 12.7k req/s, and its per-batch stages doubled when batches were halved: 2026-12-05's headline file).

    PYTHONPATH=src python benchmarks/scripts/serve_model_cpu.py --label after --json out.json

This process is the model process: the real ``Batcher`` and one ``serve_pipe`` thread per worker, with the GIL
switch interval `gpukit serve` sets. The model is a stand-in: ``prepare`` stacks the uint8 images into one buffer
(as the pinned staging copy does) and then sleeps ``--prep-ms`` (the host→device copy and its wait, GIL released);
``execute`` sleeps ``--exec-ms`` (the forward pass) and returns float32 probabilities. ``--workers`` spawned
processes are the HTTP workers: each runs the real ``PipeClient`` on an asyncio loop and keeps ``--outstanding``
requests of a 64×64 decoded image in flight (a closed loop, as 64 clients over 8 workers). Reported: this
process's CPU (all its threads) per request, requests per second, and the clients' mean round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import sys
import time
from typing import Any

import numpy as np

CLASSES = 10


class StandIn:
    """prepare: stack into one reused buffer, then the device's share as a sleep; execute: a sleep, then rows."""

    def __init__(self, max_batch: int, side: int, prep_s: float, exec_s: float) -> None:
        self.buf = np.empty((max_batch, 3, side, side), np.uint8)
        self.probs = np.full((max_batch, CLASSES), 1.0 / CLASSES, np.float32)
        self.prep_s, self.exec_s = prep_s, exec_s

    def prepare(self, items: list[Any]) -> int:
        np.stack(items, out=self.buf[: len(items)])
        time.sleep(self.prep_s)
        return len(items)

    def execute(self, n: int) -> tuple[np.ndarray, list[str | None]]:
        time.sleep(self.exec_s)
        return self.probs[:n].copy(), [None] * n


def worker_main(conn: Any, outstanding: int, side: int, seconds: float, results: Any) -> None:
    asyncio.run(_worker(conn, outstanding, side, seconds, results))


async def _worker(conn: Any, outstanding: int, side: int, seconds: float, results: Any) -> None:
    from gpukit.serve.ipc import PipeClient

    client = PipeClient(conn)
    image = np.random.default_rng(0).integers(0, 256, (3, side, side), dtype=np.uint8)
    done = asyncio.Event()
    stats = {"answered": 0, "errors": 0, "rtt_s": 0.0}
    t_end = time.monotonic() + seconds

    def send() -> None:
        t0 = time.monotonic()

        def answered(outcome: Any) -> None:
            if outcome.error is None:
                stats["answered"] += 1
                stats["rtt_s"] += time.monotonic() - t0
            else:
                stats["errors"] += 1
            if time.monotonic() < t_end:
                send()
            else:  # past the end: this request is not sent again
                done.set()

        client.submit(image, t0 + 30.0, answered)

    for _ in range(outstanding):
        send()
    await done.wait()
    await asyncio.sleep(0.2)  # the last answers in flight
    results.put(stats)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from gpukit.serve.batcher import Batcher
    from gpukit.serve.ipc import serve_pipe

    sys.setswitchinterval(0.0005)  # as gpukit serve's model process
    ctx = mp.get_context("spawn")
    runner = StandIn(args.max_batch, args.side, args.prep_ms / 1e3, args.exec_ms / 1e3)
    batcher = Batcher(runner, args.max_batch, args.max_wait_ms / 1e3, 4096)
    batcher.start()
    results = ctx.Queue()
    procs = []
    for _ in range(args.workers):
        ours, theirs = ctx.Pipe(duplex=True)
        p = ctx.Process(target=worker_main, args=(theirs, args.outstanding, args.side, args.seconds, results))
        p.start()
        theirs.close()
        procs.append(p)
        serve_pipe(ours, batcher, (3, args.side, args.side))  # its thread reads this worker's requests
    time.sleep(args.seconds * 0.25)  # warm: the clients started, the queues steady
    images0, c0, t0 = batcher.stats.images, time.process_time(), time.monotonic()
    time.sleep(args.seconds * 0.5)
    images1, c1, t1 = batcher.stats.images, time.process_time(), time.monotonic()
    per_worker = [results.get(timeout=args.seconds + 30) for _ in procs]
    for p in procs:
        p.join(10)
    batcher.stop()
    answered = sum(w["answered"] for w in per_worker)
    return {
        "cpu_us_per_request": (c1 - c0) / max(1, images1 - images0) * 1e6,
        "req_per_s": (images1 - images0) / (t1 - t0),
        "mean_batch": batcher.stats.images / max(1, batcher.stats.batches),
        "rtt_ms": sum(w["rtt_s"] for w in per_worker) / max(1, answered) * 1e3,
        "errors": sum(w["errors"] for w in per_worker),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--outstanding", type=int, default=8, help="requests in flight per worker")
    ap.add_argument("--side", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    ap.add_argument("--prep-ms", type=float, default=0.2)
    ap.add_argument("--exec-ms", type=float, default=0.2)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    runs = [measure(args) for _ in range(args.repeats)]
    for r in runs:
        print(
            f"{args.label:>8}: {r['cpu_us_per_request']:6.1f} µs CPU/request, {r['req_per_s']:8.0f} req/s, "
            f"batch {r['mean_batch']:5.1f}, round trip {r['rtt_ms']:.2f} ms, errors {r['errors']}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "args": vars(args), "runs": runs, "python": platform.python_version(),
                       "cpus": os.cpu_count()}, f, indent=1)  # fmt: skip


if __name__ == "__main__":
    main()
