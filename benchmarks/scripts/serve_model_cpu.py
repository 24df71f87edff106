"""CPU microseconds the model process of `gpukit serve` spends per request outside the model itself: reading the
workers' pipes, batching, preparing, replying (issue 27: on an H200 the seed CNN's model process spent 1.1 cores
at 12.7k req/s, and its per-batch stages doubled when batches were halved: 2026-12-05's headline file).

    PYTHONPATH=src python benchmarks/scripts/serve_model_cpu.py --label after --json out.json

This process is the model process: the real ``Batcher`` and ``PipeHub`` (on an older tree given on PYTHONPATH, one
``serve_pipe`` thread per worker), with the GIL switch interval `gpukit serve` sets. The model is a stand-in:
``prepare`` stacks the uint8 images into one buffer (as the pinned staging copy does) and then sleeps ``--prep-ms``
(the host→device copy and its wait, GIL released); ``execute`` sleeps ``--exec-ms`` (the forward pass) and returns
float32 probabilities. ``--workers`` spawned processes are the HTTP workers: each runs the real ``PipeClient`` on an
asyncio loop and keeps ``--outstanding`` requests of a 64×64 decoded image in flight (a closed loop, as 64 clients
over 8 workers). Reported: this process's CPU (all its threads) per request, requests per second, and the clients'
mean round trip.

``--model seed-cnn|resnet50`` puts the real ``ModelRunner`` (random weights, warmed as the server warms it) on
``--device`` in place of the stand-in, with each batch's ``prepare`` and ``execute`` timed on the wall clock and on
their thread's CPU clock (``Timed``), and ``--profile PATH`` writes what the torch profiler saw in the middle half of
the last run, every thread of this process where the torch has the switch (2.14 has; else a warning): the ops and
CUDA runtime calls by host time, per batch. On the
H200 that is the seed CNN's per-batch CUDA side (issue 27: its next step):

    PYTHONPATH=src python3 benchmarks/scripts/serve_model_cpu.py --model seed-cnn --device cuda --workers 8 \
        --outstanding 8 --repeats 2 --json $OUT/seed.json --profile $OUT/seed-profile.txt

``--think-ms T``: each client waits T (uniform in 0.5-1.5 T) between an answer and its next request, as the HTTP
workers and the client do over HTTP (about 2.5 ms of the seed CNN's round trip on an H200), so that requests come
as they come to the server, not back to back.

``--variant nosync|pinned-out|onethread`` and ``--switch-ms`` try changes to the runner and the GIL switch interval
in this harness (``VARIANTS``; an H100, 2026-12-05: none was kept, benchmarks/serve-host-share_h100_2026-12-05.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


class StandIn:
    """prepare: stack into one reused buffer, then the device's share as a sleep; execute: a sleep, then rows."""

    def __init__(self, max_batch: int, side: int, prep_s: float, exec_s: float, classes: int = 10) -> None:
        self.buf = np.empty((max_batch, 3, side, side), np.uint8)
        self.probs = np.full((max_batch, classes), 1.0 / classes, np.float32)
        self.prep_s, self.exec_s = prep_s, exec_s

    def prepare(self, items: list[Any]) -> int:
        np.stack(items, out=self.buf[: len(items)])
        time.sleep(self.prep_s)
        return len(items)

    def execute(self, n: int) -> tuple[np.ndarray, list[str | None]]:
        time.sleep(self.exec_s)
        return self.probs[:n].copy(), [None] * n


def worker_main(conn: Any, outstanding: int, side: int, seconds: float, results: Any, think_s: float = 0.0) -> None:
    asyncio.run(_worker(conn, outstanding, side, seconds, results, think_s))


async def _worker(conn: Any, outstanding: int, side: int, seconds: float, results: Any, think_s: float) -> None:
    from gpukit.serve.ipc import PipeClient

    client = PipeClient(conn)
    image = np.random.default_rng(0).integers(0, 256, (3, side, side), dtype=np.uint8)
    done = asyncio.Event()
    stats = {"answered": 0, "errors": 0, "rtt_s": 0.0}
    t_end = time.monotonic() + seconds
    loop, rng = asyncio.get_running_loop(), random.Random(os.getpid())

    def send() -> None:
        t0 = time.monotonic()

        def answered(outcome: Any) -> None:
            if outcome.error is None:
                stats["answered"] += 1
                stats["rtt_s"] += time.monotonic() - t0
            else:
                stats["errors"] += 1
            if time.monotonic() >= t_end:  # past the end: this request is not sent again
                done.set()
            elif think_s > 0:  # the client's and HTTP's share of a round trip
                loop.call_later(think_s * rng.uniform(0.5, 1.5), send)
            else:
                send()

        client.submit(image, t0 + 30.0, answered)

    for _ in range(outstanding):
        send()
    await done.wait()
    await asyncio.sleep(0.2)  # the last answers in flight
    results.put(stats)


class Timed:
    """A runner's ``prepare`` and ``execute``, each timed per batch on the wall clock and on its thread's CPU clock:
    a stage whose CPU time is near its wall time is the host's work (launches, Python, the GIL's hand-overs); one
    whose CPU time is far below it waits (for the GPU, a synchronisation, or the GIL)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.times: dict[str, list[tuple[float, float]]] = {"prepare": [], "execute": []}

    def _timed(self, stage: str, fn: Any, arg: Any) -> Any:
        w, c = time.perf_counter(), time.thread_time()
        out = fn(arg)
        self.times[stage].append((time.perf_counter() - w, time.thread_time() - c))
        return out

    def prepare(self, items: list[Any]) -> Any:
        return self._timed("prepare", self.inner.prepare, items)

    def execute(self, staged: Any) -> Any:
        return self._timed("execute", self.inner.execute, staged)

    def summary(self) -> dict[str, float]:
        """Median wall and CPU milliseconds of each stage, then cleared (one run's worth)."""
        out = {}
        for stage, rows in self.times.items():
            if rows:
                out[f"{stage}_wall_ms"] = statistics.median(r[0] for r in rows) * 1e3
                out[f"{stage}_cpu_ms"] = statistics.median(r[1] for r in rows) * 1e3
            rows.clear()
        return out


VARIANTS = ("main", "nosync", "pinned-out", "onethread")


def _nosync_prepare(stager: Any) -> Any:
    """``Stager.prepare`` without its closing ``stream.synchronize()``: the slot's ``ready`` event orders the
    executor, and the slot's pinned buffer is waited for only when it is written again (three batches later)."""
    import torch

    from gpukit.serve.staging import Staged

    copied: dict[int, Any] = {}

    def prepare(items: list[Any]) -> Any:
        k = stager._next
        slot, stream = stager.slots[k], stager.stream
        stager._next = (k + 1) % len(stager.slots)
        if k in copied:
            copied[k].synchronize()  # the last copy out of this pinned buffer has run
        with torch.inference_mode(), torch.cuda.stream(stream):
            stream.wait_event(slot.free)
            errors, shapes = stager._fill(slot.x, items, slot.pinned)
            slot.ready.record(stream)
        copied[k] = slot.ready
        return Staged(slot.x, len(items), errors, slot, shapes)

    return prepare


def _pinned_out_execute(runner: Any) -> Any:
    """``ModelRunner.execute`` with the results copied into a pinned host buffer and waited for on an event,
    instead of ``.cpu()`` (a pageable allocation and a synchronous copy)."""
    import torch

    host = torch.empty(tuple(runner.result.shape), dtype=torch.float32).pin_memory()
    done = torch.cuda.Event()

    def execute(staged: Any) -> Any:
        n = staged.n
        with torch.inference_mode(), torch.cuda.stream(runner.exec_stream):
            runner.exec_stream.wait_event(staged.slot.ready)
            runner.batch_in[:n].copy_(staged.x[:n])
            staged.slot.free.record(runner.exec_stream)
            for start in range(0, n, runner.pass_rows):
                rows = min(runner.pass_rows, n - start)
                runner.static_in[:rows].copy_(runner.batch_in[start : start + rows])
                out = runner._run_static(rows)
                runner.result[start : start + rows].copy_(out[:rows])
            host[:n].copy_(runner.result[:n], non_blocking=True)
            done.record(runner.exec_stream)
        done.synchronize()
        return host[:n].numpy().copy(), staged.errors

    return execute


class OneThread:
    """Both stages on the executing thread: ``prepare`` hands the items over, ``execute`` stages and runs them
    (one GPU wait per batch instead of two, no overlap between batches)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def prepare(self, items: list[Any]) -> Any:
        return items

    def execute(self, items: Any) -> Any:
        return self.inner.execute(self.inner.prepare(items))


def model_runner(model: str, side: int, max_batch: int, device: str, folder: Path) -> Any:
    """The served model's own runner on ``device``, warmed (random weights: the cost does not depend on them)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from serve_h200 import checkpoint

    from gpukit.serve.model import ModelRunner

    path = checkpoint(folder / model, model, side)
    runner = ModelRunner(path, device, max_batch, "bf16" if model == "resnet50" else "off")
    runner.warm()
    return runner


def real_runner(args: argparse.Namespace, folder: Path) -> Any:
    """``model_runner`` for ``args``, with ``args.variant``'s change, timed per stage."""
    runner = model_runner(args.model, args.side, args.max_batch, args.device, folder)
    if args.variant == "nosync":
        runner.stager.prepare = _nosync_prepare(runner.stager)
    if args.variant == "pinned-out":
        runner.execute = _pinned_out_execute(runner)
    return Timed(OneThread(runner) if args.variant == "onethread" else runner)


def measure(args: argparse.Namespace, runner: Any = None, profile: Path | None = None) -> dict[str, Any]:
    from gpukit.serve import ipc
    from gpukit.serve.batcher import Batcher

    sys.setswitchinterval(args.switch_ms / 1e3)  # 0.5 ms: as gpukit serve's model process
    ctx = mp.get_context("spawn")
    runner = runner or StandIn(args.max_batch, args.side, args.prep_ms / 1e3, args.exec_ms / 1e3, args.classes)
    batcher = Batcher(runner, args.max_batch, args.max_wait_ms / 1e3, 4096)
    batcher.start()
    shape = (3, args.side, args.side)
    # one thread reads every pipe (PipeHub); a tree from before it (0019e9e and earlier) had one thread per pipe
    hub = ipc.PipeHub(batcher, shape) if hasattr(ipc, "PipeHub") else None
    results = ctx.Queue()
    procs = []
    for _ in range(args.workers):
        ours, theirs = ctx.Pipe(duplex=True)
        p = ctx.Process(
            target=worker_main, args=(theirs, args.outstanding, args.side, args.seconds, results, args.think_ms / 1e3)
        )
        p.start()
        theirs.close()
        procs.append(p)
        if hub is not None:
            hub.add(ours)
        else:
            ipc.serve_pipe(ours, batcher, shape)  # type: ignore[attr-defined]
    time.sleep(args.seconds * 0.25)  # warm: the clients started, the queues steady
    batches0 = batcher.stats.batches
    images0, c0, t0 = batcher.stats.images, time.process_time(), time.monotonic()
    with _profiled(profile, args.device) as prof:
        time.sleep(args.seconds * 0.5)
    images1, c1, t1 = batcher.stats.images, time.process_time(), time.monotonic()
    if prof is not None and profile is not None:
        write_profile(prof, profile, batcher.stats.batches - batches0)
    per_worker = [results.get(timeout=args.seconds + 30) for _ in procs]
    for p in procs:
        p.join(10)
    batcher.stop()
    answered = sum(w["answered"] for w in per_worker)
    stages = runner.summary() if isinstance(runner, Timed) else {}
    return {
        **stages,
        "cpu_us_per_request": (c1 - c0) / max(1, images1 - images0) * 1e6,
        "req_per_s": (images1 - images0) / (t1 - t0),
        "mean_batch": batcher.stats.images / max(1, batcher.stats.batches),
        "rtt_ms": sum(w["rtt_s"] for w in per_worker) / max(1, answered) * 1e3,
        "errors": sum(w["errors"] for w in per_worker),
    }


def _profiled(path: Path | None, device: str) -> Any:
    if path is None:
        return contextlib.nullcontext()
    import torch

    cuda = device.startswith("cuda")
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    config = torch._C._profiler._ExperimentalConfig
    try:  # the batcher's and the pipes' threads, not only this one (torch ≥ 2.14 has the switch)
        cfg = config(profile_all_threads=True, enable_cuda_sync_events=cuda)
    except TypeError:
        print("warning: this torch profiles the main thread only: the profile will hold little", file=sys.stderr)
        cfg = config(enable_cuda_sync_events=cuda)
    return torch.profiler.profile(activities=acts, experimental_config=cfg)


def write_profile(prof: Any, path: Path, batches: int) -> None:
    """Host time per batch of each op and CUDA runtime call (self time: its own, not its children's)."""
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    lines = [f"# {batches} batches profiled; host µs per batch (self), calls per batch, name"]
    for e in rows[:60]:
        per = e.self_cpu_time_total / max(1, batches)
        lines.append(f"{per:10.1f} {e.count / max(1, batches):8.2f}  {e.key}")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--outstanding", type=int, default=8, help="requests in flight per worker")
    ap.add_argument("--side", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--max-wait-ms", type=float, default=2.0)
    ap.add_argument(
        "--think-ms", type=float, default=0.0, help="each client's pause between an answer and its next request"
    )
    ap.add_argument("--prep-ms", type=float, default=0.2)
    ap.add_argument("--exec-ms", type=float, default=0.2)
    ap.add_argument("--classes", type=int, default=10, help="the stand-in's probabilities per row (ResNet-50: 1000)")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--model", choices=("seed-cnn", "resnet50"), help="the real ModelRunner instead of the stand-in")
    ap.add_argument("--device", default="cpu", help="with --model: cpu | cuda")
    ap.add_argument("--profile", type=Path, help="the torch profiler's per-batch host time of the last run, here")
    ap.add_argument("--switch-ms", type=float, default=0.5, help="the GIL switch interval (gpukit serve: 0.5)")
    ap.add_argument("--variant", choices=VARIANTS, default="main", help="with --model: a change to the runner, tried")
    args = ap.parse_args()
    if args.model == "resnet50" and args.side == 64:
        args.side = 224
    with tempfile.TemporaryDirectory() as tmp:
        runner = real_runner(args, Path(tmp)) if args.model else None
        runs = [measure(args, runner, args.profile if i == args.repeats - 1 else None) for i in range(args.repeats)]
    for r in runs:
        stages = "".join(
            f", {k.replace('_ms', '')} {v:.2f} ms" for k, v in r.items() if k.endswith("_ms") and k != "rtt_ms"
        )
        print(
            f"{args.label:>8}: {r['cpu_us_per_request']:6.1f} µs CPU/request, {r['req_per_s']:8.0f} req/s, "
            f"batch {r['mean_batch']:5.1f}, round trip {r['rtt_ms']:.2f} ms, errors {r['errors']}{stages}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, "args": vars(args), "runs": runs, "python": platform.python_version(),
                       "cpus": os.cpu_count()}, f, indent=1, default=str)  # fmt: skip


if __name__ == "__main__":
    main()
