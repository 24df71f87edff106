"""Issue 27's engines on one GPU: GPU-alone img/s of ResNet-50 224 px in bf16, channels_last, eager and compiled,
at batch 64 and 256, and the accuracy gate of each engine through `gpukit serve`'s own builder.

    PYTHONPATH=src python3 benchmarks/scripts/serve_engine_probe.py --out /tmp/out      # (serve_engine_h200.sh)

Steps, each written to ``OUT/engine.json`` as soon as it is done (a step cut by the time limit leaves the others):
1. a ResNet-50 trained briefly by `gpukit train` on generated two-class JPEGs (so its probabilities are confident
   and its run has a validation split for the gate; random weights if training fails, said so in the JSON);
2. the forward pass alone, uint8 batches already on the GPU, bf16 autocast, channels_last, at 64 and 256 rows:
   ``eager`` (kernel launches from Python, as serve_h200.py's GPU-alone figure), ``eager+graph`` and
   ``compile+graph`` (``gpukit.serve.engines.engine_net``: max-autotune kernels, one CUDA graph captured per batch
   size as ``ModelRunner`` does); CUDA events around 20 replays, the median of 7 samples, after 20 warm-up calls;
   the compile time of each size is its own figure;
3. ``build_runner(--engine auto --amp bf16 --max-batch 64)``: both engines built at every padded size, gated on the
   run's validation images against fp32 eager, timed, one chosen: the ``EngineChoice`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def trained_resnet(work: Path, device: str) -> tuple[Path, str]:
    from serve_h200 import checkpoint, make_images

    data = make_images(work / "data", 224, 1024)
    out = work / "run"
    cmd = [sys.executable, "-m", "gpukit", "train", str(data), "--model", "resnet50", "--image-size", "224",
           "--epochs", "1", "--min-steps", "120", "--batch-size", "64", "--device", device, "--out", str(out),
           "--quiet"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{os.environ.get('PYTHONPATH', '')}"}
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
        if proc.returncode == 0 and (out / "best.json").exists():
            return out, "gpukit train: 120 steps on 1,024 generated 224 px JPEGs (two classes)"
        say(f"train failed (rc {proc.returncode}): {proc.stderr[-400:]}")
    except subprocess.TimeoutExpired:
        say("train timed out")
    return checkpoint(work / "random", "resnet50", 224), "random weights (training failed)"


def time_graph(fn: Any, x: Any) -> float:
    """img/s of ``fn(x)`` replayed as a CUDA graph (captured after 20 warm-up calls on a side stream)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(20):
            fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(graph):
        fn(x)
    return samples(graph.replay, int(x.shape[0]))


def samples(call: Any, rows: int, inner: int = 20, count: int = 7) -> float:
    import torch

    for _ in range(5):
        call()
    times = []
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            call()
        end.record()
        torch.cuda.synchronize()  # the events' times are valid only after this
        times.append(start.elapsed_time(end) / 1000 / inner)
    return rows / statistics.median(times)


def forward_of(net: Any) -> Any:
    import torch

    from gpukit.train.augment import to_float
    from gpukit.train.predict import probabilities

    def fn(x: Any) -> Any:
        with torch.autocast("cuda", torch.bfloat16, cache_enabled=False):
            return probabilities(net(to_float(x).contiguous(memory_format=torch.channels_last)))

    return fn


def alone(model: Path, device: str, results: dict[str, Any], save: Any, modes: list[str]) -> None:
    """Eager, eager + graph, then each inductor mode + graph (``default``: no autotuning), at batch 64 and 256;
    each compile timed (a fresh inductor cache per mode: the checkpoint's own ``.gpukit-engine`` folder is not used)."""
    import torch

    from gpukit.serve import engines
    from gpukit.train.predict import load_model

    torch.backends.cudnn.benchmark = False
    net = load_model(model, device).net.to(memory_format=torch.channels_last).requires_grad_(False)
    table = results.setdefault("alone_img_per_s", {})
    for b in (64, 256):
        x = torch.randint(0, 256, (b, 3, 224, 224), dtype=torch.uint8, device=device)
        with torch.inference_mode():
            table[f"eager_b{b}"] = samples(lambda x=x: forward_of(net)(x), b)
        table[f"eager+graph_b{b}"] = time_graph(forward_of(net), x)
        save()
    for mode in modes:
        torch._dynamo.reset()
        engines.CUDA_MODE = None if mode == "default" else mode
        compiled = engines.engine_net(net, "compile", True, 2, None)
        name = "compile+graph" if mode == "max-autotune-no-cudagraphs" else f"compile-{mode}+graph"
        for b in (64, 256):
            x = torch.randint(0, 256, (b, 3, 224, 224), dtype=torch.uint8, device=device)
            t0 = time.perf_counter()
            with torch.inference_mode():
                forward_of(compiled)(x)
                torch.cuda.synchronize()
            results.setdefault("compile_s", {})[f"{name}_b{b}"] = time.perf_counter() - t0
            table[f"{name}_b{b}"] = time_graph(forward_of(compiled), x)
            save()
            say(f"{name} batch {b}: {table[f'{name}_b{b}']:,.0f} img/s, compiled in "
                f"{results['compile_s'][f'{name}_b{b}']:.0f} s")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/serve_engine_probe")))
    p.add_argument("--device", default="cuda")
    p.add_argument("--modes", default="default", help="inductor modes, comma-separated (default: no autotuning)")
    p.add_argument(
        "--auto-max-batch", type=int, default=8, help="--max-batch of the builder's gated auto run (0: skip)"
    )
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/serve_engine_work")
    results: dict[str, Any] = {"device": a.device}

    def save() -> None:
        (a.out / "engine.json").write_text(json.dumps(results, indent=1, default=str))

    from serve_h200 import versions

    results["versions"] = versions()
    model, how = trained_resnet(work, a.device)
    results["model"] = how
    save()
    say(f"model: {how}")
    alone(model, a.device, results, save, a.modes.split(","))
    if not a.auto_max_batch:
        return 0
    from gpukit.serve.choose import EngineSpec, build_runner

    _, choice = build_runner(EngineSpec(model, a.device, "auto", "bf16", max_batch=a.auto_max_batch, cache=False))
    results["auto"] = choice.to_dict()
    save()
    say(f"auto: {choice.engine} ({choice.reason}); gate {choice.gate}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
