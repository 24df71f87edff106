"""Where the model process's time goes when serving ResNet-50 with --decode nvjpeg, without HTTP (a diagnostic).

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/serve_pipeline_probe.py [--images 512] [--seconds 6]

On one GPU, with the served model's own ``ModelRunner`` (bf16, CUDA graphs) and 224×224 JPEGs:
A. ``prepare`` alone (nvJPEG batch decode + staging) at batch 64/128/256, the GPU otherwise idle;
B. ``execute`` alone (copy into the static input, graph replay, results to the host);
C. ``prepare`` while another thread keeps ``execute`` busy: does the decode wait behind the forward's kernels?
D. the real ``Batcher`` (prepare and execute on their two threads) fed by 8 submitting threads that keep 256
   requests outstanding, as 8 HTTP workers' pipe threads would: images/s, mean batch, per-stage seconds.
Writes serve-pipeline-probe.json into $OUT.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_h200 as sh
from serve_prep_probe import batcher_rate, busy


def timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--device", default="cuda")  # cpu: a dry run of the script
    ap.add_argument("--modes", default="pinned,pageable", help="nvJPEG's input bitstreams: pinned (gpukit's), pageable")
    args = ap.parse_args()
    import numpy as np
    from PIL import Image

    from gpukit.serve.model import ModelRunner

    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpukit-pipe-"))
    ckpt = sh.checkpoint(work / "resnet50", "resnet50", 224)
    rng = np.random.default_rng(0)
    jpegs = []
    for _ in range(args.images):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)).save(buf, "JPEG", quality=90)
        jpegs.append(buf.getvalue())
    runner = ModelRunner(ckpt, args.device, max_batch=256, amp="bf16", cuda_graphs=True)
    if args.device != "cuda":
        jpegs = [np.zeros((3, 224, 224), np.uint8) for _ in jpegs]  # the CPU runner takes decoded pixels
    runner.warm_batch_decoder() if args.device == "cuda" else None
    doc: dict = {"jpeg_bytes_mean": statistics.mean(map(len, jpegs))}
    decoder = runner.stager.decoder
    pinned = decoder._pinned
    for mode in args.modes.split(","):
        if mode == "pageable":  # what gpukit did before: one pageable tensor per JPEG
            import torch

            decoder._pinned = lambda datas: [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
        else:
            decoder._pinned = pinned
        doc[mode] = stages(runner, jpegs, args.seconds)
    (out / "serve-pipeline-probe.json").write_text(json.dumps(doc, indent=2))
    return 0


def stages(runner, jpegs, seconds: float) -> dict:
    doc: dict = {}
    for b in (64, 128, 256):
        items = jpegs[:b]
        prep = timed(lambda items=items: runner.prepare(items), 10)
        staged = runner.prepare(items)
        exe = timed(lambda staged=staged: runner.execute(staged), 10)
        # C: prepare while another thread keeps the GPU busy with this batch size's forward
        end = busy(runner, items)
        loaded = timed(lambda items=items: runner.prepare(items), 10)
        end()
        doc[f"b{b}"] = {"prepare_idle_ms": 1e3 * statistics.median(prep[2:]),
                        "execute_ms": 1e3 * statistics.median(exe[2:]),
                        "prepare_beside_execute_ms": 1e3 * statistics.median(loaded[2:])}  # fmt: skip
        print(f"batch {b}: {doc[f'b{b}']}", flush=True)
    for max_batch in (64, 128, 256):
        doc[f"batcher_max{max_batch}"] = batcher_rate(runner, jpegs, max_batch, seconds, None, 256)
        print(f"batcher max {max_batch}: {doc[f'batcher_max{max_batch}']}", flush=True)
    return doc


if __name__ == "__main__":
    sys.exit(main())
