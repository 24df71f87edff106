"""Why preparing a batch (nvJPEG) takes longer beside a running forward pass than on an idle GPU (a diagnostic).

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/serve_sm_share_probe.py [--sms 0,128,120,112] [--seconds 4]
    … --streams 40 | --gaps | --host-copy          (one of the other experiments instead)

With the served model's own ``ModelRunner`` (ResNet-50 bf16, CUDA graphs, ``--engine`` eager or compile) and the
serve benchmark's 224×224 JPEGs, no HTTP (benchmarks/serve-host-copy_h100_2026-12-06.md has the results):
- default: the forward pass confined to N of the GPU's SMs by a CUDA green context (its graphs captured again on the
  context's stream; 0: every SM), so that nvJPEG's per-image kernels find free SMs. For each N: ``execute`` alone at
  64 and 128 rows, ``prepare`` of 64 and 128 beside a thread that keeps ``execute`` busy, and the real ``Batcher``
  (max batch 128, whole 64-row passes) fed to 160 and 256 requests outstanding. Writes serve-sm-share.json.
- ``--streams N``: the forward pass on N streams made one after the other (each takes the next hardware queue).
- ``--gaps``: idle gaps between forward passes, and a profile of the CPU-side calls.
- ``--host-copy``: ``execute``'s results through the pinned buffer against ``.cpu()``, in turns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_prep_probe as pp


def green_stream(num_sms: int):
    """A stream whose kernels run on ``num_sms`` SMs only (a green context, torch.cuda.green_contexts: torch 2.11+)."""
    import torch
    from torch.cuda.green_contexts import GreenContext

    ctx = GreenContext.create(num_sms=num_sms, device_id=torch.cuda.current_device())
    return ctx, ctx.Stream()


def recapture(runner, stream) -> None:
    """Capture the runner's graphs again on ``stream`` and make it the runner's execution stream."""
    import torch

    runner.exec_stream = stream
    torch.cuda.synchronize()
    with torch.inference_mode():
        with torch.cuda.stream(stream):
            for b in runner.buckets:
                runner._forward(runner.static_in[:b])
        stream.synchronize()
        runner.capture(stream)
    torch.cuda.synchronize()


def exec_ms(runner, jpegs, b: int) -> float:
    return pp.exec_ms(runner, runner.prepare(jpegs[:b]))


def variant(runner, split, jpegs, seconds: float) -> dict:
    doc: dict = {f"exec_b{b}_ms": exec_ms(runner, jpegs, b) for b in (64, 128)}
    for b in (64, 128):
        doc[f"prep_b{b}_beside"] = pp.prep_split(runner, split, jpegs[:b], beside=True)
    for outstanding in (160, 256):
        split.calls.clear()
        doc[f"batcher_out{outstanding}"] = {
            **pp.batcher_rate(runner, jpegs, 128, seconds, 64, outstanding),
            "decoder_call_ms": pp.med_ms(split.calls) if split.calls else None,
        }
    return doc


def streams(runner, split, jpegs, n: int, doc: dict, out: Path) -> int:
    """Prepare 64 beside ``execute`` on each of ``n`` streams made one after the other: a stream takes the next of
    the host's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) in turn, and two streams on one queue wait for each
    other. If the forward pass's queue is one that nvJPEG's streams also use, its decode waits behind forward passes."""
    import torch

    doc["streams"] = rows = []
    for k in range(n):
        runner.exec_stream = torch.cuda.Stream()
        rows.append({"k": k, "exec_b64_ms": exec_ms(runner, jpegs, 64),
                     **pp.prep_split(runner, split, jpegs[:64], beside=True)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    (out / "serve-sm-share-streams.json").write_text(json.dumps(doc, indent=2))
    return 0


def gaps(runner, split, jpegs, doc: dict, out: Path) -> int:
    """Prepare 64 beside a thread that runs ``execute`` with an idle gap after each (0, 0.5, 1, 2, 4 ms): if the
    decode waits for the GPU to run no forward pass at all (a device-wide synchronisation), it finishes in a gap.
    Then a profile of preparing beside back-to-back passes, its CPU-side calls sorted by their own time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    items = jpegs[:64]
    doc["gaps"] = {}
    for i, gap_ms in enumerate((0.0, 0.5, 1.0, 2.0, 4.0, 0.0)):
        row = pp.prep_split(runner, split, items, beside=True, gap_s=gap_ms / 1e3)
        doc["gaps"][f"{i}: {gap_ms} ms"] = row
        print(f"gap {gap_ms} ms: {json.dumps(row)}", flush=True)
    end = pp.busy(runner, items)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(8):
            runner.prepare(items)
    end()
    torch.cuda.synchronize()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=90)
    (out / "serve-sm-share-profile.txt").write_text(table)
    (out / "serve-sm-share-gaps.json").write_text(json.dumps(doc, indent=2))
    return 0


def host_copy(runner, split, jpegs, seconds: float, doc: dict, out: Path) -> int:
    """``execute``'s results into the runner's pinned buffer (``ModelRunner._to_host``) against ``.cpu()`` into
    pageable memory (before 2026-12-06), in turns: ``execute`` alone, ``prepare`` beside it, the batcher."""
    pinned = runner._to_host
    pageable = lambda t, n: t[:n].cpu().numpy()  # noqa: E731
    doc["host_copy"] = rows = []
    for name in ("pinned", "pageable", "pinned", "pageable"):
        runner._to_host = pinned if name == "pinned" else pageable
        row = {"copy": name, "exec_b64_ms": exec_ms(runner, jpegs, 64)}
        for b in (64, 128):
            row[f"prep_b{b}_beside"] = pp.prep_split(runner, split, jpegs[:b], beside=True)
        for outstanding in (160, 256):
            row[f"batcher_out{outstanding}"] = pp.batcher_rate(runner, jpegs, 128, seconds, 64, outstanding)
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "serve-host-copy.json").write_text(json.dumps(doc, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sms", default="0,128,120,112")
    ap.add_argument("--engine", default="eager")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--streams", type=int, default=0, help="instead: prepare beside execute on N new streams in turn")
    ap.add_argument("--gaps", action="store_true", help="instead: beside execute with idle gaps, and a profile")
    ap.add_argument("--host-copy", action="store_true", help="instead: results into pinned or pageable memory")
    args = ap.parse_args()
    import torch

    from gpukit.serve.cuda_env import set_cuda_queues
    from gpukit.serve.model import ModelRunner

    set_cuda_queues("cuda")
    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    ckpt, jpegs = pp.resnet_and_jpegs("gpukit-smshare-")
    props = torch.cuda.get_device_properties(0)
    doc: dict = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
                 "engine": args.engine, "variants": {}}  # fmt: skip
    t0 = time.perf_counter()
    runner = ModelRunner(ckpt, "cuda", max_batch=128, amp="bf16", cuda_graphs=True, engine=args.engine)
    runner.warm_batch_decoder()
    doc["start_s"] = time.perf_counter() - t0
    split = pp.Split(runner.stager)
    for b in (64, 128):
        doc[f"prep_b{b}_idle"] = pp.prep_split(runner, split, jpegs[:b], beside=False)
    print(json.dumps({k: v for k, v in doc.items() if k != "variants"}), flush=True)
    if args.host_copy:
        return host_copy(runner, split, jpegs, args.seconds, doc, out)
    if args.gaps:
        return gaps(runner, split, jpegs, doc, out)
    if args.streams:
        return streams(runner, split, jpegs, args.streams, doc, out)
    keep = []  # the green contexts live as long as their graphs
    for n in (int(s) for s in args.sms.split(",")):
        try:
            if n:
                ctx, stream = green_stream(n)
                keep.append(ctx)
            else:
                stream = torch.cuda.Stream()
            recapture(runner, stream)
            doc["variants"][str(n)] = v = variant(runner, split, jpegs, args.seconds)
        except Exception as exc:  # a diagnostic: record what failed and go on
            doc["variants"][str(n)] = v = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"sms {n}: {json.dumps(v)}", flush=True)
        (out / "serve-sm-share.json").write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
