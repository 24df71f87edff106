"""Each batch decoder beside the forward pass, with the staging stream at normal and at high priority (a diagnostic).

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/serve_decoder_prio_probe.py [--engine eager] [--seconds 4]

The question: ResNet-50 over HTTP is bound by preparing its batches (nvJPEG beside the forward pass, about 11,700
img/s on an H200), and nvImageCodec was last compared with nvJPEG before the model process asked for 32 CUDA
hardware queues (``gpukit.serve.cuda_env``), with its work on a stream of normal priority. torchvision's nvJPEG
decodes on a pool stream of its own; nvImageCodec decodes on the stream it is given (the staging stream), so only
its kernels can be put ahead of the forward pass's by a stream priority.

With the served model's own ``ModelRunner`` (bf16, CUDA graphs, ``--engine``), 32 hardware queues and the serve
benchmark's 224×224 JPEGs, for each decoder and staging-stream priority:
A. ``prepare`` of 128 beside a thread that keeps ``execute`` busy (median ms);
B. the real ``Batcher`` (max batch 128) fed by 8 submitting threads that keep 256 requests outstanding: img/s, mean
   batch, per-stage ms. The order is run twice (ABAB) so that drift shows.
There is no HTTP: the hybrid backend's host threads have the host to themselves here, which they do not in a server.
Writes serve-decoder-prio-<engine>.json into $OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_prep_probe import batcher_rate, busy, med_ms, resnet_and_jpegs


def prep_beside(runner, items, reps: int = 12) -> float:
    end = busy(runner, items)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        runner.prepare(items)
        ts.append(time.perf_counter() - t)
    end()
    return med_ms(ts[2:])


def stream_matches(runner) -> str:
    """Whether the decoder's last images name the staging stream (their cached views then serve), nvImageCodec only."""
    images = getattr(runner.stager.decoder, "_images", [])
    if not images:
        return "n/a"
    want = runner.stager.stream.cuda_stream
    streams = {img.__cuda_array_interface__.get("stream") for img in images}
    return f"{sorted(map(str, streams))} vs staging {want}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="eager")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--decoders", default="nvjpeg,nvimgcodec-hw,nvimgcodec")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    from gpukit.serve.cuda_env import set_cuda_queues

    queues = set_cuda_queues("cuda")  # before CUDA starts, as gpukit serve does
    import torch

    from gpukit.serve.model import ModelRunner

    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    ckpt, jpegs = resnet_and_jpegs("gpukit-decprio-")
    least, greatest = torch.cuda.Stream.priority_range()
    doc: dict = {"engine": args.engine, "queues": queues, "jpeg_bytes_mean": statistics.mean(map(len, jpegs)),
                 "priority_range": [least, greatest], "gpu": torch.cuda.get_device_name(), "runs": []}  # fmt: skip
    t0 = time.monotonic()
    runner = ModelRunner(ckpt, "cuda", max_batch=128, amp="bf16", cuda_graphs=True, engine=args.engine)
    runner.warm_batch_decoder()
    doc["load_s"] = round(time.monotonic() - t0, 1)
    print(f"loaded {args.engine} in {doc['load_s']} s, queues {queues}", flush=True)
    streams = {"normal": runner.stager.stream, "high": torch.cuda.Stream(device=runner.device, priority=greatest)}
    for rnd in range(args.rounds):
        for kind in args.decoders.split(","):
            for prio, stream in streams.items():
                if kind == "nvjpeg" and prio == "high" and rnd > 0:
                    continue  # torchvision decodes on its own stream: only the stack kernel moves; once is enough
                runner.stager.stream = stream
                try:
                    runner.warm_batch_decoder(kind)
                except Exception as exc:  # nvImageCodec missing or failing: say so, go on
                    doc["runs"].append({"decoder": kind, "priority": prio, "error": repr(exc)})
                    print(f"{kind} {prio}: {exc!r}", flush=True)
                    continue
                runner.prepare(jpegs[:128])
                row = {"round": rnd, "decoder": kind, "priority": prio}
                row["prep128_beside_ms"] = prep_beside(runner, jpegs[:128])
                row.update(batcher_rate(runner, jpegs, 128, args.seconds))
                row["image_stream"] = stream_matches(runner)
                doc["runs"].append(row)
                print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    (out / f"serve-decoder-prio-{args.engine}.json").write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
