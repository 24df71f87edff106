"""Batch preparation beside the forward pass, before and after 2026-12-03's change (a diagnostic, no HTTP).

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/serve_queues_probe.py [--seconds 3] [--queues 8,32]

The served model's own ``ModelRunner`` (ResNet-50 224 px, bf16, CUDA graphs, eager, ``--max-batch 128``: passes of
64 rows) and 224×224 JPEGs, in one child process per ``CUDA_DEVICE_MAX_CONNECTIONS`` value (the driver reads it
when CUDA starts). In each child, for the staging stream as it was ("before": priority 0, synchronised at the end
of each batch) and as it is now ("after": ``staging.PREP_PRIORITY``, synchronised at the start of the next):
A. ``execute`` alone at 64 and 128 rows (ms per batch, img/s);
B. ``prepare`` of 64 and 128 JPEGs, 12 in a row then one synchronize: ms per batch alone, and beside a thread that
   keeps ``execute`` (64 rows) running, with that thread's forward img/s meanwhile;
C. whether a decode waits for unrelated GPU work: 64 JPEGs prepared while a one-block ``torch.cuda._sleep`` kernel
   (~20 ms) runs on another stream, for 3 such streams. About 20 ms on every stream: a device-wide wait inside the
   decode (an allocation, a free); on some streams only: a hardware queue shared with that stream; idle time on all:
   neither, and what remains beside the forward pass is SMs;
D. the real ``Batcher`` (8 submitting threads, 256 outstanding, the server's GIL switch interval) at max batch 64
   and 128 (align 64): img/s, prep and exec ms per batch.
Writes serve-queues-probe.json into $OUT and prints one line per figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_h200 as sh
from serve_prep_probe import batcher_rate

VARIANTS = {"before": (0, False), "after": (None, True)}  # (stream priority, None: PREP_PRIORITY; sync at start)


def set_variant(runner, name: str) -> None:
    import torch

    from gpukit.serve import staging

    priority, sync_at_start = VARIANTS[name]
    stream = torch.cuda.Stream(device=runner.device, priority=staging.PREP_PRIORITY if priority is None else priority)
    runner.stager.stream = runner.stager.decoder.stream = stream
    runner.stager.sync_at_start = sync_at_start


def prep_ms(runner, items, reps: int = 12) -> float:
    """ms per batch over ``reps`` prepares in a row, the last one's GPU work included."""
    runner.prepare(items)
    runner.stager.stream.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        runner.prepare(items)
    runner.stager.stream.synchronize()
    return 1e3 * (time.perf_counter() - t) / reps


class Busy:
    """A thread that keeps ``execute`` of one prepared batch running; counts the rows it ran."""

    def __init__(self, runner, items) -> None:
        self.runner, self.staged = runner, runner.prepare(items)
        self.stop, self.rows = threading.Event(), 0
        self.thread = threading.Thread(target=self.spin)

    def spin(self) -> None:
        while not self.stop.is_set():
            self.runner.execute(self.staged)
            self.rows += self.staged.n

    def __enter__(self) -> Busy:
        self.thread.start()
        time.sleep(0.2)
        self.rows, self.t0 = 0, time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.img_per_s = self.rows / (time.perf_counter() - self.t0)
        self.stop.set()
        self.thread.join()


def exec_alone(runner, jpegs) -> dict:
    out = {}
    for b in (64, 128):
        staged = runner.prepare(jpegs[:b])
        runner.execute(staged)
        t = time.perf_counter()
        for _ in range(12):
            runner.execute(staged)
        ms = 1e3 * (time.perf_counter() - t) / 12
        out[f"b{b}"] = {"ms": ms, "img_per_s": 1e3 * b / ms}
    return out


def prep_beside(runner, jpegs) -> dict:
    out = {}
    for b in (64, 128):
        alone = prep_ms(runner, jpegs[:b])
        with Busy(runner, jpegs[256 - 64 :]) as busy:
            beside = prep_ms(runner, jpegs[:b])
        out[f"b{b}"] = {
            "alone_ms": alone,
            "beside_ms": beside,
            "alone_img_per_s": 1e3 * b / alone,
            "beside_img_per_s": 1e3 * b / beside,
            "forward_img_per_s_meanwhile": busy.img_per_s,
        }
    return out


def sleep_cycles_per_ms() -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    return 10_000_000 / start.elapsed_time(end)


def beside_sleep(runner, jpegs) -> dict:
    import torch

    cycles = int(20 * sleep_cycles_per_ms())
    out = {"idle_ms": prep_ms(runner, jpegs[:64], reps=6)}
    for k in range(3):
        side, ts = torch.cuda.Stream(device=runner.device), []
        for _ in range(6):
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)  # one block on one SM: it holds no SMs the decode needs
            t = time.perf_counter()
            runner.prepare(jpegs[:64])
            runner.stager.stream.synchronize()
            ts.append(1e3 * (time.perf_counter() - t))
            side.synchronize()
        out[f"stream{k}_ms"] = statistics.median(ts)
    out["sleep_ms"] = cycles / sleep_cycles_per_ms()
    return out


def child(seconds: float) -> dict:
    import torch

    from gpukit.serve.model import ModelRunner

    sys.setswitchinterval(0.0005)  # as the server's model process (gpukit.serve.server)
    work = Path(tempfile.mkdtemp(prefix="gpukit-queues-"))
    ckpt = sh.checkpoint(work / "resnet50", "resnet50", 224)
    jpegs = [p.read_bytes() for p in sorted(sh.make_images(work / "img", 224, 256).rglob("*.jpg"))]
    runner = ModelRunner(ckpt, "cuda", max_batch=128, amp="bf16", cuda_graphs=True)
    runner.warm()
    runner.warm_batch_decoder()
    doc: dict = {
        "queues": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "unset (8)"),
        "jpeg_bytes_mean": statistics.mean(map(len, jpegs)),
        "exec_alone": exec_alone(runner, jpegs),
    }
    for name in VARIANTS:
        set_variant(runner, name)
        doc[name] = {"prep": prep_beside(runner, jpegs), "sleep": beside_sleep(runner, jpegs)}
        for max_batch, align in ((64, None), (128, 64)):
            doc[name][f"batcher_max{max_batch}"] = batcher_rate(runner, jpegs, max_batch, seconds, align, 256)
        torch.cuda.synchronize()
    return doc


def lines(q: str, doc: dict) -> list[str]:
    out = [f"queues {q}: exec alone " + ", ".join(f"{k} {v['ms']:.2f} ms" for k, v in doc["exec_alone"].items())]
    for name in VARIANTS:
        d = doc[name]
        for b, p in d["prep"].items():
            out.append(f"queues {q} {name} prep {b}: alone {p['alone_ms']:.2f} ms ({p['alone_img_per_s']:,.0f} img/s),"
                       f" beside {p['beside_ms']:.2f} ms ({p['beside_img_per_s']:,.0f} img/s), forward meanwhile "
                       f"{p['forward_img_per_s_meanwhile']:,.0f} img/s")  # fmt: skip
        s = d["sleep"]
        streams = ", ".join(f"{k} {v:.2f}" for k, v in s.items() if k.startswith("stream"))
        out.append(f"queues {q} {name} decode 64 beside a {s['sleep_ms']:.0f} ms one-block kernel: idle "
                   f"{s['idle_ms']:.2f} ms, {streams}")  # fmt: skip
        for k, v in d.items():
            if k.startswith("batcher"):
                out.append(f"queues {q} {name} {k}: {v['img_per_s']:,.0f} img/s, mean batch {v['mean_batch']:.1f}, "
                           f"prep {v['prep_ms_per_batch']:.2f} ms, exec {v['exec_ms_per_batch']:.2f} ms")  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0, help="per batcher run")
    ap.add_argument("--queues", default="8,32", help="CUDA_DEVICE_MAX_CONNECTIONS values, one child process each")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.seconds)))
        return 0
    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    doc: dict = {"versions": sh.versions(), "runs": {}}
    for q in args.queues.split(","):
        env = {**os.environ, "CUDA_DEVICE_MAX_CONNECTIONS": q}
        cmd = [sys.executable, __file__, "--child", "--seconds", str(args.seconds)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        if proc.returncode != 0:
            doc["runs"][q] = {"error": proc.stderr[-2000:]}
            print(f"queues {q}: failed\n{proc.stderr[-2000:]}", flush=True)
            continue
        doc["runs"][q] = json.loads(proc.stdout.strip().splitlines()[-1])
        print("\n".join(lines(q, doc["runs"][q])), flush=True)
        (out / "serve-queues-probe.json").write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
