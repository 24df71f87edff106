"""Why preparing a batch is slower beside the forward pass (ResNet-50, --decode nvjpeg), without HTTP (a diagnostic).

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/serve_prep_probe.py [--seconds 4]

With the served model's own ``ModelRunner`` (bf16, CUDA graphs) and the serve benchmark's 224×224 JPEGs:
A. ``prepare`` split into the decoder call (CPU side: torchvision's nvJPEG call returns) and the rest (the wait for
   the staging stream), alone and beside a thread that keeps ``execute`` busy, at 64 and 128 images; with the
   staging stream at normal and at high priority.
B. a ``torch.profiler`` trace of preparing beside executing: GPU time per stream and the longest kernels.
C. the real ``Batcher`` (8 submitting threads, 256 or 160 requests outstanding) for each variant: staging-stream
   priority, ``max_batch`` 64 and 128, ``align`` (whole 64-row passes) on and off.
Writes serve-prep-probe.json (and the profiler table, serve-prep-profile.txt) into $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_h200 as sh


def med_ms(xs: list[float]) -> float:
    return 1e3 * statistics.median(xs)


class Split:
    """Times the decoder call inside ``Stager.prepare`` (the CPU side of the decode)."""

    def __init__(self, stager) -> None:
        self.stager, self.calls = stager, []
        inner = type(stager)._decode.__get__(stager)  # the class's method, whatever wrapped it before

        def timed(datas):
            t = time.perf_counter()
            out = inner(datas)
            self.calls.append(time.perf_counter() - t)
            return out

        stager._decode = timed


def resnet_and_jpegs(prefix: str) -> tuple[Path, list[bytes]]:
    """A ResNet-50 checkpoint (random weights, 224 px) and the serve benchmark's 512 JPEGs, in a fresh folder."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    ckpt = sh.checkpoint(work / "resnet50", "resnet50", 224)
    folder = sh.make_images(work / "images", 224, 512)
    return ckpt, [p.read_bytes() for p in sorted(folder.rglob("*.jpg"))]


def exec_ms(runner, staged, reps: int = 12) -> float:
    """``execute`` of one prepared batch alone: the median of ``reps`` calls after two more."""
    ts = []
    for _ in range(reps + 2):
        t = time.perf_counter()
        runner.execute(staged)
        ts.append(time.perf_counter() - t)
    return med_ms(ts[2:])


def busy(runner, items, gap_s: float = 0.0):
    """A thread that keeps ``execute`` running on a prepared batch (idle ``gap_s`` after each); returns its stop
    function."""
    stop = threading.Event()
    staged = runner.prepare(items)

    def spin() -> None:
        while not stop.is_set():
            runner.execute(staged)
            if gap_s:
                time.sleep(gap_s)

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.2)

    def end() -> None:
        stop.set()
        th.join()

    return end


def prep_split(runner, split: Split, items, beside: bool, gap_s: float = 0.0) -> dict:
    end = busy(runner, items, gap_s) if beside else None
    split.calls.clear()
    totals = []
    for _ in range(12):
        t = time.perf_counter()
        runner.prepare(items)
        totals.append(time.perf_counter() - t)
    if end:
        end()
    return {"prepare_ms": med_ms(totals[2:]), "decoder_call_ms": med_ms(split.calls[2:])}


def batcher_rate(
    runner, jpegs, max_batch: int, seconds: float, align: int | None = None, outstanding: int = 256
) -> dict:
    from gpukit.serve.batcher import Batcher

    batcher = Batcher(runner, max_batch=max_batch, max_wait_s=0.002, queue_size=4096, align=align)
    batcher.start()
    done, lock, end = [0], threading.Lock(), time.monotonic() + seconds

    def client(k: int) -> None:
        sem = threading.Semaphore(0)

        def cb(_o) -> None:
            with lock:
                done[0] += 1
            sem.release()

        for i in range(outstanding // 8):
            batcher.submit(jpegs[(k * 32 + i) % len(jpegs)], time.monotonic() + 30, cb)
        i = 0
        while time.monotonic() < end:
            sem.acquire()
            batcher.submit(jpegs[(k + i) % len(jpegs)], time.monotonic() + 30, cb)
            i += 1

    t0 = time.monotonic()
    clients = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    wall = time.monotonic() - t0
    s = batcher.stats
    batcher.stop()
    return {"img_per_s": done[0] / wall, "mean_batch": s.images / max(1, s.batches),
            "prep_ms_per_batch": 1e3 * s.prep_s / max(1, s.batches),
            "exec_ms_per_batch": 1e3 * s.busy_s / max(1, s.batches)}  # fmt: skip


def profile(runner, items, out: Path, name: str) -> dict:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    end = busy(runner, items)
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(6):
            runner.prepare(items)
    end()
    torch.cuda.synchronize()
    (out / f"serve-prep-{name}.txt").write_text(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30))
    trace = Path(tempfile.mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text()).get("traceEvents", [])
    streams: dict[str, dict] = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        s = streams.setdefault(str(e.get("tid")), {"events": 0, "busy_ms": 0.0, "names": {}})
        s["events"] += 1
        s["busy_ms"] += e.get("dur", 0) / 1e3
        name = str(e.get("name"))[:80]
        s["names"][name] = s["names"].get(name, 0.0) + e.get("dur", 0) / 1e3
    for s in streams.values():
        s["names"] = dict(sorted(s["names"].items(), key=lambda kv: -kv[1])[:6])
    return streams


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    args = ap.parse_args()
    import torch

    from gpukit.serve.model import ModelRunner

    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    ckpt, jpegs = resnet_and_jpegs("gpukit-prep-")
    least, greatest = torch.cuda.Stream.priority_range()
    doc: dict = {"jpeg_bytes_mean": statistics.mean(map(len, jpegs)), "priority_range": [least, greatest]}
    runner = ModelRunner(ckpt, "cuda", max_batch=256, amp="bf16", cuda_graphs=True)
    runner.warm_batch_decoder()
    normal = runner.stager.stream
    high = torch.cuda.Stream(device=runner.device, priority=greatest)
    doc["exec"] = {}
    for b in (64, 128, 256):
        doc["exec"][f"b{b}_ms"] = exec_ms(runner, runner.prepare(jpegs[:b]))
    print(f"exec: {doc['exec']}", flush=True)
    split = Split(runner.stager)
    for prio, stream in (("normal", normal), ("high", high)):
        runner.stager.stream = stream
        for b in (64, 128):
            for beside in (False, True):
                key = f"prep_{prio}_b{b}_{'beside' if beside else 'idle'}"
                doc[key] = prep_split(runner, split, jpegs[:b], beside)
                print(f"{key}: {doc[key]}", flush=True)
    runner.stager.stream = normal
    doc["profile_b128"] = profile(runner, jpegs[:128], out, "profile_b128")
    # (staging-stream priority, max_batch, align, requests outstanding); 160 outstanding: about what the HTTP
    # server's model process holds at 256 clients (the rest are in the HTTP workers, the pipes and the generator)
    variants = [("normal", 128, None, 256), ("normal", 128, 64, 256), ("normal", 64, None, 256),
                ("high", 128, 64, 256), ("normal", 128, None, 160), ("normal", 128, 64, 160)]  # fmt: skip
    for prio, max_batch, align, outstanding in variants:
        runner.stager.stream = high if prio == "high" else normal
        sp = Split(runner.stager)
        key = f"batcher_{prio}_max{max_batch}_align{align}_out{outstanding}"
        doc[key] = {**batcher_rate(runner, jpegs, max_batch, args.seconds, align, outstanding),
                    "decoder_call_ms": med_ms(sp.calls) if sp.calls else None}  # fmt: skip
        print(f"{key}: {doc[key]}", flush=True)
    (out / "serve-prep-probe.json").write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
