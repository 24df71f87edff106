"""Issue 27: ResNet-50's model process with a share of each batch's JPEGs decoded on host threads (``HostShare``,
libjpeg-turbo) beside nvJPEG, without HTTP. Alternates host-thread counts on one GPU:

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/serve_host_share_probe.py [--threads 0,4,2,6,0,4] [--seconds 6]

For each count: the real ``Batcher`` (prepare and execute on their two threads; max batch 128, 2 ms wait) fed by 8
submitting threads keeping 256 requests outstanding (``serve_prep_probe.batcher_rate``): images/s, mean batch, ms
per batch of each stage, and the share the decoder settled on. Then the pixels: one batch of 64 staged with and
without the share, their largest and mean absolute difference. Writes serve-host-share.json into $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_h200 as sh
from serve_prep_probe import batcher_rate


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="0,4,2,6,0,4")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--max-batch", type=int, default=128)
    args = ap.parse_args()
    sys.setswitchinterval(0.0005)  # as gpukit serve's model process (the first run of 2026-12-05 had Python's 5 ms)
    import torch

    from gpukit.serve.model import ModelRunner

    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpukit-share-"))
    ckpt = sh.checkpoint(work / "resnet50", "resnet50", 224)
    folder = sh.make_images(work / "images", 224, 256)
    jpegs = [p.read_bytes() for p in sorted(folder.rglob("*.jpg"))]
    t0 = time.perf_counter()
    runner = ModelRunner(ckpt, "cuda", max_batch=args.max_batch, amp="bf16", cuda_graphs=True)
    runner.warm()
    doc: dict = {"jpeg_bytes_mean": sum(map(len, jpegs)) / len(jpegs), "warm_s": time.perf_counter() - t0,
                 "gpu": torch.cuda.get_device_name(), "cpus": os.cpu_count(), "runs": []}  # fmt: skip
    for threads in (int(t) for t in args.threads.split(",")):
        runner.warm_batch_decoder("nvjpeg", threads)
        host = runner.stager.decoder.host
        r = batcher_rate(runner, jpegs, args.max_batch, args.seconds, runner.pass_rows, 256)
        r |= {"threads": threads, "share": host.share if host else 0.0, "rates": host.rates if host else {}}
        if host:
            host.close()
        doc["runs"].append(r)
        print(json.dumps(r), flush=True)
    doc["pixels"] = pixels(runner, jpegs[:64])
    print(json.dumps(doc["pixels"]), flush=True)
    (out / "serve-host-share.json").write_text(json.dumps(doc, indent=1))
    return 0


def pixels(runner, jpegs) -> dict:
    """One batch staged by nvJPEG alone and with half of it on host threads: how far apart their pixels are."""
    runner.warm_batch_decoder("nvjpeg", 0)
    a = runner.prepare(jpegs).x[: len(jpegs)].clone()
    runner.warm_batch_decoder("nvjpeg", 4)
    runner.stager.decoder.host.share = 0.5
    b = runner.prepare(jpegs).x[: len(jpegs)].clone()
    runner.stager.decoder.host.close()
    diff = (a.int() - b.int()).abs()
    return {"max_abs": int(diff.max()), "mean_abs": float(diff.float().mean()),
            "rows_differing": int((diff.flatten(1).amax(1) > 0).sum())}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
