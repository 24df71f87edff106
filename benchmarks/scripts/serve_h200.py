"""`gpukit serve` beside LitServe 0.2.19 on one GPU, same model, images, machine and load generator, in one run.

Steps (≤ 9 minutes on one H200 with its 16-core host; the time guard skips the optional runs past 8):
 1. JPEGs: 64×64 (seed CNN) and 224×224 (ResNet-50), generated; a seed-CNN checkpoint from a quick `gpukit train`
    on the 64×64 ones, a ResNet-50 checkpoint with random weights (throughput does not depend on the weights).
 2. ResNet-50 alone on the GPU (uint8 already on the device, bf16 autocast, channels_last), batch 64 and 256.
 3. Seed CNN, 64 clients: gpukit (batched; Pillow decoding in its HTTP processes, and --decode nvjpeg), LitServe
    batched with 1 and 2 workers per device, LitServe unbatched; ResNet-50, 256 clients: gpukit batched with
    Pillow and with nvJPEG decoding, batching off (--max-batch 1, with the decoding that won), LitServe batched
    with 1 and 2 workers.
 4. Saturation curves (1 … 256 clients) for gpukit and the better LitServe configuration, both models.
 5. Cross-checks with wrk (if .deb/usr/bin/wrk exists; LD_LIBRARY_PATH must find its libluajit) at the
    headline client count of the configurations in ``WRK_AT``.
 6. Optional (issue 27): ResNet-50 with ``--decode nvimgcodec`` and ``nvimgcodec-hw``, the seed CNN with
    ``nvimgcodec`` (nvImageCodec must be on PYTHONPATH). ``GPUKIT_SERVE_ENGINE`` picks the engine (default eager;
    ``SERVE_READY_S`` how long a start may take: compile builds every batch size before /readyz);
    ``GPUKIT_SERVE_EXTRA`` adds `gpukit serve` options to every gpukit server ("--decode-threads 2");
    ``SERVE_KEEP_WORK=1`` keeps the last run's work folder (a compiled engine starts from its cache; a seed CNN whose
    training finished is not trained again). ``SERVE_SKIP_ALONE=1`` skips the GPU-alone figure (35 s).
    ``SERVE_PYSPY=<py-spy binary>`` samples the server's model process during each gpukit point's measured window
    (``py-spy record --threads --idle --nonblocking``, raw stacks) into ``pyspy-<key>.txt`` beside the results.
Every load comes from `gpukit loadtest` (several processes; its own CPU use is recorded beside each point).
Writes $OUT/serve_h200.json, serve_h200.png and serve_h200.md.

`--only KEY[,KEY]` runs just those configurations (the GPU-alone measurement always runs too) at their headline
client count (256 for ResNet-50, 64 for the seed CNN), 10 s per point unless --duration says otherwise, and writes
serve_h200_only.{json,md,png} so a full run's files are not overwritten; about 90 s for one ResNet-50 key.

    OUT=/tmp/out bash benchmarks/scripts/serve_h200.sh          # on the GPU machine
    OUT=/tmp/out bash benchmarks/scripts/serve_h200.sh --only resnet/gpukit-nvjpeg   # one configuration, ~90 s
    python3 benchmarks/scripts/serve_h200.py --out /tmp/o --device cpu --quick   # the CPU smoke path
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# gpukit's --max-batch for ResNet-50. 128, not 256: with --decode nvjpeg the next batch's decode runs beside the
# forward pass, and at 256 it waits behind the forward's kernels (the model process alone, no HTTP, 224×224 JPEGs:
# prepare 17.6 ms idle but 119 ms beside a batch-256 forward; the batcher makes 6,899 img/s at max 256 and 8,753
# at max 128; benchmarks/scripts/serve_pipeline_probe.py, H200, 2026-12-01).
RESNET_MAX_BATCH = 128
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
T0 = time.monotonic()
LOG: list[str] = []


def say(msg: str) -> None:
    line = f"[{time.monotonic() - T0:6.1f}s] {msg}"
    LOG.append(line)
    print(line, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    """The servers' and load generators' environment: this tree's ``src`` first (``SERVE_SRC``: another copy of it,
    for an A/B of one change)."""
    src = os.environ.get("SERVE_SRC") or str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": f"{src}:{os.environ.get('PYTHONPATH', '')}"}


def make_images(folder: Path, size: int, n: int) -> Path:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(size)
    for cls, channel in (("cat", 0), ("dog", 2)):
        (folder / cls).mkdir(parents=True, exist_ok=True)
        for i in range(n // 2):
            px = rng.integers(0, 120, (size, size, 3), dtype=np.uint8)
            px[..., channel] = rng.integers(130, 256, (size, size), dtype=np.uint8)
            Image.fromarray(px).save(folder / cls / f"{cls}{i:04d}.jpg", quality=90)
    return folder


def checkpoint(folder: Path, model: str, size: int) -> Path:
    import torch

    from gpukit.train import checkpoint as ck
    from gpukit.train.models import build_model

    torch.manual_seed(0)
    net = build_model(model, size, 2)
    folder.mkdir(parents=True, exist_ok=True)
    ck.save(
        folder,
        "best",
        {f"model.{k}": v for k, v in net.state_dict().items()},
        {"model": model, "classes": ["cat", "dog"], "image_size": size},
    )
    return folder


def train_seed(data: Path, out: Path, device: str, quick: bool) -> tuple[Path, str]:
    done = out / ".trained"  # written after a train that finished: a killed one may have left a best.json
    if os.environ.get("SERVE_KEEP_WORK") and done.exists():  # the same weights in every run of a call
        return out, "kept from the previous run (SERVE_KEEP_WORK)"
    cmd = [
        sys.executable,
        "-m",
        "gpukit",
        "train",
        str(data),
        "--model",
        "seed-cnn",
        "--epochs",
        "1" if quick else "3",
        "--image-size",
        "64",
        "--batch-size",
        "64",
        "--device",
        device,
        "--out",
        str(out),
    ] + (["--min-steps", "20"] if quick else [])  # the recipe's 3,600 steps took over 150 s on a CPU
    try:
        proc = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=150)
        if proc.returncode == 0 and (out / "best.json").exists():
            done.touch()
            return out, "gpukit train, " + ("1 epoch, at least 20 steps" if quick else "3 epochs, at least 3,600 steps")
        say(f"gpukit train failed (rc {proc.returncode}): {proc.stderr[-400:]}")
    except subprocess.TimeoutExpired:
        say("gpukit train timed out")
    return checkpoint(out.with_name("seed-built"), "seed-cnn", 64), "random weights (train failed)"


def gpu_alone(model: Path, batches: list[int], device: str) -> dict[str, float]:
    """ResNet-50 forward throughput with uint8 batches already on the GPU, as the servers run it: through gpukit's
    own timing engine (``gpukit.bench.timing.measure``, CUDA events), the median of at least 5 samples of 10 calls and
    at least 2 s of timed calls, so a GPU still warming up (one fixed 30-call window after 20 warm-up calls read
    5,499 and 6,370 img/s at batch 64 on two fresh machines, and about 13,000 on the next invocation) moves a
    sample, not the figure. ``batch_<b>_spread`` is that row's (max − min) / median."""
    import torch

    from gpukit.bench.timing import EventClock, HostClock, StopRule, measure
    from gpukit.train.predict import load_model

    cuda = device.startswith("cuda")
    torch.backends.cudnn.benchmark = False
    loaded = load_model(model, device)
    net = loaded.net.to(memory_format=torch.channels_last) if cuda else loaded.net
    clock = EventClock(lambda: torch.cuda.Event(enable_timing=True), lambda s, e: s.elapsed_time(e) / 1e3) if cuda \
        else HostClock()  # fmt: skip
    rule = StopRule(target=0.01, min_samples=5, min_time_s=2.0, max_time_s=30.0) if cuda else StopRule(0.0, 2)
    out: dict[str, float] = {}
    for b in batches:
        x = torch.randint(0, 256, (b, 3, loaded.image_size, loaded.image_size), dtype=torch.uint8, device=device)

        def step(_i: int, x: torch.Tensor = x) -> None:
            with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16, enabled=cuda):
                net(x.float().mul_(1 / 255).contiguous(memory_format=torch.channels_last))

        samples = measure(step, clock, warmup=20 if cuda else 1, inner=10 if cuda else 1, lead=2 if cuda else 0,
                          stop=rule)  # fmt: skip
        out[f"batch_{b}_img_per_s"] = b / samples.median_s
        out[f"batch_{b}_spread"] = round(samples.spread, 3)
    return out


class Server:
    def __init__(self, name: str, cmd: list[str], health: str, predict: str) -> None:
        self.name, self.cmd = name, cmd
        self.log = open(f"/tmp/serve_h200_{name}.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, env=env(), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.health, self.url = health, predict

    def wait(self, timeout: float | None = None) -> bool:
        # --engine compile builds every padded size before /readyz says 200: minutes, not seconds
        deadline = time.monotonic() + (timeout or float(os.environ.get("SERVE_READY_S", "180")))
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.health, timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.3)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.log.close()

    def tail(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-1500:]


def gpukit_server(
    model: Path,
    device: str,
    workers: int,
    max_batch: int,
    bf16: bool,
    decode: str = "pil",
    extra: list[str] | None = None,  # more `gpukit serve` options
) -> Server:
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "gpukit",
        "serve",
        str(model),
        "--device",
        device,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--max-batch",
        str(max_batch),
        "--max-wait-ms",
        "2",
        "--queue-size",
        "4096",
        "--timeout-s",
        "30",
        "--quiet",
        "--decode",
        decode,
        "--engine",  # the runs measured before issue 27's engines: auto (the CUDA default) would compile at start
        os.environ.get("GPUKIT_SERVE_ENGINE", "eager"),
    ] + (["--amp", "bf16"] if bf16 else [])
    cmd += (extra or []) + os.environ.get("GPUKIT_SERVE_EXTRA", "").split()  # e.g. "--decode-threads 2"
    name = f"gpukit-w{workers}-b{max_batch}-{decode}"
    return Server(name, cmd, f"http://127.0.0.1:{port}/readyz", f"http://127.0.0.1:{port}/v1/predict")


def litserve_server(model: Path, device: str, workers: int, max_batch: int, bf16: bool) -> Server:
    port = free_port()
    cmd = [
        sys.executable,
        str(HERE / "litserve_api.py"),
        "--model",
        str(model),
        "--port",
        str(port),
        "--workers-per-device",
        str(workers),
        "--max-batch-size",
        str(max_batch),
        "--batch-timeout",
        "0.005",
        "--accelerator",
        "cuda" if device.startswith("cuda") else "cpu",
    ] + (["--bf16"] if bf16 else [])
    name = f"litserve-w{workers}-b{max_batch}"
    return Server(name, cmd, f"http://127.0.0.1:{port}/health", f"http://127.0.0.1:{port}/predict")


def loadtest(url: str, images: Path, concurrency: int, duration: float) -> dict:
    procs = max(1, min(8, (os.cpu_count() or 2) // 2, (concurrency + 7) // 8))
    cmd = [
        sys.executable,
        "-m",
        "gpukit",
        "loadtest",
        url,
        "--image",
        str(images),
        "--concurrency",
        str(concurrency),
        "--duration",
        f"{duration:g}",
        "--warmup",
        "1.5",
        "--processes",
        str(procs),
        "--timeout-s",
        "30",
        "--json",
    ]
    proc = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=duration + 90)
    if proc.returncode != 0:
        raise RuntimeError(f"loadtest failed: {proc.stderr[-800:]}")
    doc = json.loads(proc.stdout)
    keep = (
        "throughput_rps",
        "ok_rps",
        "latency_ms",
        "statuses",
        "server_timing_mean_ms",
        "generator_cpu_s",
        "generator_cpu_per_process",
        "generator_saturated",
        "processes",
        "requests",
        "sent",
        "duration_s",
        "errors",
    )
    return {"concurrency": concurrency, **{k: doc[k] for k in keep}}


def wrk_check(url: str, image: Path, duration: float, connections: int = 64) -> dict | None:
    wrk = ROOT / ".deb" / "usr" / "bin" / "wrk"
    if not wrk.exists():
        return None
    boundary = "wrkBoundary0123"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{image.name}"\r\n'
            "Content-Type: image/jpeg\r\n\r\n"
        ).encode()
        + image.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    body_file = Path("/tmp/serve_h200_wrk_body.bin")
    body_file.write_bytes(body)
    script = Path("/tmp/serve_h200_wrk.lua")
    script.write_text(
        f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*all")\nf:close()\n'
        f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "multipart/form-data; boundary={boundary}"\n'
    )
    cmd = [str(wrk), "-t4", f"-c{connections}", f"-d{int(duration)}s", "--latency", "-s", str(script), url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", proc.stdout)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", proc.stdout)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", proc.stdout)
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    return {
        "tool": f"wrk -t4 -c{connections}",
        "rps": float(rps.group(1)) if rps else None,
        "p99_ms": float(p99.group(1)) * scale[p99.group(2)] if p99 else None,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "stdout_tail": proc.stdout[-1200:],
    }


def group_stats(pgid: int, pattern: str = "[0-9]*/stat") -> dict[Path, tuple[str, list[str]]]:
    """The ``/proc`` stat files matching ``pattern`` whose process group is ``pgid``: path → (comm, the fields after
    "(comm)": state, ppid, pgrp, …, utime at 11, stime at 12, the CPU last run on at 36)."""
    out = {}
    for stat in Path("/proc").glob(pattern):
        try:
            head, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        if int(fields[2]) == pgid:
            out[stat] = (head.split("(", 1)[1], fields)
    return out


def tree_cpu(pgid: int) -> dict[int, float]:
    """CPU seconds (user + system) of every process in the server's process group, by pid, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    return {int(stat.parent.name): (int(f[11]) + int(f[12])) / tick for stat, (_, f) in group_stats(pgid).items()}


def pyspy(server: Server, key: str, duration: float) -> subprocess.Popen | None:
    """py-spy sampling the model process (the server's own pid) during a gpukit point's measured window (from 3 s
    in: the generators' start and loadtest's 1.5 s warm-up left out), when SERVE_PYSPY names the binary: every
    thread, idle ones too, without pausing the process; raw stacks with their sample counts."""
    binary = os.environ.get("SERVE_PYSPY")
    if not binary or "/v1/predict" not in server.url or not server.name.startswith("gpukit"):
        return None
    out = PROFILE_DIR / f"pyspy-{key.replace('/', '_')}.txt"
    cmd = [binary, "record", "--pid", str(server.proc.pid), "--duration", str(max(1, int(duration) - 2)), "--rate"]
    cmd += ["200", "--threads", "--idle", "--nonblocking", "--format", "raw", "-o", str(out)]
    later = ["sh", "-c", 'sleep 3; exec "$@"', "sh", *cmd]
    return subprocess.Popen(later, stdout=subprocess.DEVNULL, stderr=open(out.with_suffix(".log"), "w"))


def batch_sizes(server: Server) -> dict[str, float]:
    """gpukit's batch-size histogram from /metrics (count, sum, cumulative buckets); empty for other servers."""
    if "/v1/predict" not in server.url:
        return {}
    try:
        with urllib.request.urlopen(server.url.replace("/v1/predict", "/metrics"), timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for m in re.finditer(r'^gpukit_batch_size_(count|sum|bucket\{le="([^"]+)"\})\s+(\S+)$', text, re.M):
        out[m.group(2) or m.group(1)] = float(m.group(3))
    return out


def run_config(results: dict, key: str, server: Server, images: Path, points: list[int], duration: float) -> None:
    say(f"start {server.name} for {key}")
    t_start = time.monotonic()
    ready = server.wait()
    results.setdefault("ready_s", {})[key] = round(time.monotonic() - t_start, 1)  # process start → /readyz 200
    if not ready:
        say(f"{server.name} did not become ready:\n{server.tail()}")
        results["runs"][key] = {"error": "did not start", "log": server.tail()}
        server.stop()
        return
    rows = []
    try:
        for c in points:
            if time.monotonic() - T0 > BUDGET_S and rows:
                say(f"time guard: skipping the rest of {key}")
                break
            before, t, hist0 = tree_cpu(server.proc.pid), time.monotonic(), batch_sizes(server)
            spy = pyspy(server, key, duration)
            row = loadtest(server.url, images, c, duration)
            if spy is not None:
                try:
                    spy.wait(30)
                except subprocess.TimeoutExpired:  # a hung profiler costs its samples, not the point
                    spy.kill()
            after, wall, hist1 = tree_cpu(server.proc.pid), time.monotonic() - t, batch_sizes(server)
            # forward passes during the loadtest call (its warm-up included): how many, mean size, ≤ each bucket
            row["batches"] = {k: v - hist0.get(k, 0.0) for k, v in hist1.items()}
            n = row["batches"].get("count", 0.0)
            row["mean_batch"] = row["batches"]["sum"] / n if n else None
            # the server's processes, busiest first (the model process is usually the first): CPU s per wall s,
            # over the whole loadtest call (warm-up and the generator's start included, so a lower bound)
            row["server_cpu_per_process"] = sorted(
                ((after[k] - before.get(k, 0.0)) / wall for k in after), reverse=True
            )
            p99 = row["latency_ms"]["p99"]
            say(
                f"{key} c={c}: {row['throughput_rps']:,.0f} req/s, p99 {p99 if p99 is None else round(p99, 1)} ms, "
                f"statuses {row['statuses']}, generator CPU {max(row['generator_cpu_per_process']):.0%} max/process, "
                f"server CPU {[round(x, 2) for x in row['server_cpu_per_process']]}, mean batch {row['mean_batch']}, "
                f"batches {row['batches']}"
            )
            rows.append(row)
    except Exception as exc:  # one failing configuration must not lose the others
        say(f"{key} failed: {exc}")
        results["runs"][key] = {"error": str(exc), "log": server.tail(), "points": rows}
        server.stop()
        return
    if key in WRK_AT and WRK:  # the C load generator at the configuration's headline client count
        name = "wrk" if key == "seed/gpukit" else f"wrk {key}"
        results[name] = wrk_check(server.url, next(images.rglob("*.jpg")), duration, WRK_AT[key])
        say(f"{name} cross-check: {results[name]}")
    server.stop()
    results["runs"][key] = {"server": server.name, "cmd": server.cmd, "points": rows}


def at(results: dict, key: str, c: int) -> dict | None:
    for row in results["runs"].get(key, {}).get("points", []):
        if row["concurrency"] == c:
            return row
    return None


def summarise(results: dict) -> list[str]:
    lines = []

    def rps(key: str, c: int) -> float | None:
        row = at(results, key, c)
        return row["ok_rps"] if row else None

    def p99(key: str, c: int) -> float | None:
        row = at(results, key, c)
        return row["latency_ms"]["p99"] if row else None

    lit_best = max(
        (k for k in ("seed/litserve-w1", "seed/litserve-w2") if rps(k, 64)), key=lambda k: rps(k, 64) or 0, default=None
    )
    g = rps("seed/gpukit", 64)
    if g and lit_best:
        ratio = g / rps(lit_best, 64)
        ok = ratio >= 2.5 and (p99("seed/gpukit", 64) or 1e9) <= (p99(lit_best, 64) or 0)
        lines.append(
            f"seed CNN, 64 clients: gpukit {g:,.0f} req/s (p99 {p99('seed/gpukit', 64):.1f} ms) vs "
            f"{lit_best} {rps(lit_best, 64):,.0f} (p99 {p99(lit_best, 64):.1f} ms): {ratio:.2f}× — target "
            f"≥ 2.5× at a p99 no higher: {'MET' if ok else 'NOT MET'}"
        )
    alone = results.get("gpu_alone", {}).get("batch_256_img_per_s")
    best = max(("resnet/gpukit-pil", "resnet/gpukit-nvjpeg"), key=lambda k: rps(k, 256) or 0)
    r = rps(best, 256)
    if r and alone:
        frac = r / alone
        ok = frac >= 0.5 and (p99(best, 256) or 1e9) <= 100
        lines.append(
            f"ResNet-50, 256 clients: {best} {r:,.0f} req/s (p99 {p99(best, 256):.1f} ms) = "
            f"{frac:.1%} of GPU-alone {alone:,.0f} img/s — target ≥ 50 % at p99 ≤ 100 ms: "
            f"{'MET' if ok else 'NOT MET'}"
        )
    off = rps("resnet/gpukit-nobatch", 256)
    if r and off:
        lines.append(
            f"ResNet-50 dynamic batching on/off: {r:,.0f} / {off:,.0f} = {r / off:.2f}× — target ≥ 3×: "
            f"{'MET' if r / off >= 3 else 'NOT MET'}"
        )
    for key, run in results["runs"].items():
        for row in run.get("points", []):
            if row["generator_saturated"]:
                lines.append(f"warning: the generator was near a full core at {key} c={row['concurrency']}")
    return lines


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for r, model in enumerate(("seed", "resnet")):
        for key, run in results["runs"].items():
            pts = run.get("points", [])
            if not key.startswith(model + "/") or len(pts) < 2:
                continue
            cs = [p["concurrency"] for p in pts]
            label = key.split("/", 1)[1]
            axes[r][0].plot(cs, [p["ok_rps"] for p in pts], "o-", label=label)
            axes[r][1].plot(cs, [p["latency_ms"]["p99"] for p in pts], "o-", label=label)
            axes[r][2].plot(cs, [100 * sum(p["generator_cpu_per_process"]) for p in pts], "o-", label=label)
        title = "seed CNN, 64×64 JPEG" if model == "seed" else "ResNet-50, 224×224 JPEG"
        for ax, what in zip(
            axes[r],
            ("throughput (req/s with 200)", "p99 latency (ms)", "generator CPU (% of a core)"),
            strict=True,
        ):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("concurrent clients")
            ax.set_title(f"{title}: {what}", fontsize=9)
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
        axes[r][1].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


BUDGET_S = 450.0  # seconds; the shell wrapper kills the run at 560
PROFILE_DIR = Path("/tmp")  # where pyspy() writes: main() sets it to --out
WRK = True
WRK_AT = {
    "seed/gpukit": 64,
    "seed/gpukit-wide": 64,
    "resnet/gpukit-nvjpeg": 256,
    "resnet/gpukit-nvimgcodec": 256,
    "seed/gpukit-nvimgcodec": 64,
}  # wrk -c, at the points the issues quote
KEYS = (  # every configuration of the plan, in its order (--only picks among them)
    "seed/gpukit",
    "seed/litserve-w2",
    "seed/litserve-w1",
    "resnet/gpukit-nvjpeg",
    "resnet/gpukit-pil",
    "resnet/gpukit-nobatch",
    "resnet/litserve-w1",
    "resnet/litserve-w2",
    "seed/litserve-unbatched",
    "seed/gpukit-nvjpeg",
    "resnet/gpukit-nvimgcodec",
    "resnet/gpukit-nvimgcodec-hw",
    "seed/gpukit-nvimgcodec",
    "seed/gpukit-wide",
)


def parse_only(text: str | None) -> set[str] | None:
    if text is None:
        return None
    keys = {k.strip() for k in text.split(",") if k.strip()}
    unknown = sorted(keys - set(KEYS))
    if unknown or not keys:
        raise ValueError(f"--only {text!r}: unknown {', '.join(unknown) or '(empty)'}; hint: one of {', '.join(KEYS)}")
    return keys


def main() -> int:
    global BUDGET_S, PROFILE_DIR
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/serve_h200")))
    p.add_argument("--device", default="cuda")
    p.add_argument("--duration", type=float, default=None, help="seconds per point (5; 10 with --only)")
    p.add_argument("--quick", action="store_true", help="CPU smoke path: tiny runs, few points")
    p.add_argument("--skip-litserve", action="store_true")
    p.add_argument("--workers", type=int, default=None, help="gpukit HTTP workers (default: half the cores, ≤ 8)")
    p.add_argument("--resnet-max-batch", type=int, default=RESNET_MAX_BATCH)
    p.add_argument("--only", default=None, metavar="KEY[,KEY]", help=f"just these runs, of: {', '.join(KEYS)}")
    a = p.parse_args()
    try:
        only = parse_only(a.only)
    except ValueError as exc:
        p.error(str(exc))  # exit 2 with "error: …"
    if a.duration is None:
        a.duration = 10.0 if only else 5.0
    stem = "serve_h200_only" if only else "serve_h200"
    a.out.mkdir(parents=True, exist_ok=True)
    PROFILE_DIR = a.out
    work = Path("/tmp/serve_h200_work")
    if not os.environ.get("SERVE_KEEP_WORK"):  # set: the same seeded checkpoints again, their engine caches kept
        shutil.rmtree(work, ignore_errors=True)
    cuda = a.device.startswith("cuda")
    workers = a.workers or max(2, min(8, (os.cpu_count() or 4) // 2))
    curve = ([1, 8, 64, 256] if not a.quick else [1, 8]) if only is None else []  # --only: headline point only
    if a.quick:
        BUDGET_S = 300.0
    results: dict = {
        "device": a.device,
        "cpu_count": os.cpu_count(),
        "workers": workers,
        "duration_s": a.duration,
        "only": sorted(only) if only else None,
        "runs": {},
        "versions": versions(),
    }
    img64 = make_images(work / "img64", 64, 256 if not a.quick else 32)
    img224 = make_images(work / "img224", 224, 256 if not a.quick else 16)
    say("images written")
    if only is None or any(k.startswith("seed/") for k in only):
        seed, how = train_seed(img64, work / "seed-run", a.device, a.quick)
    else:  # not served in this run
        seed, how = work / "seed-unused", "not needed (--only)"
    results["seed_checkpoint"] = how
    resnet = checkpoint(work / "resnet50", "resnet50", 224)
    say(f"checkpoints ready (seed: {how})")
    if only is not None and not any(k.startswith("resnet/") for k in only):
        results["gpu_alone"] = {"skipped": "no ResNet-50 run in --only"}  # 35 s saved in a seed-only run
    elif os.environ.get("SERVE_SKIP_ALONE"):  # A/B rounds in one call: measured once, in the first round
        results["gpu_alone"] = {"skipped": "SERVE_SKIP_ALONE"}
    else:
        try:
            results["gpu_alone"] = gpu_alone(resnet, [64, 256] if not a.quick else [4], a.device)
            say(f"ResNet-50 alone: {results['gpu_alone']}")
        except Exception as exc:
            results["gpu_alone"] = {"error": str(exc)}
    d = a.duration
    seed_pts = [64] if not a.quick else [8]
    res_pts = [256] if not a.quick else [8]
    lit = {
        "seed/litserve-w2": (seed, 2, 64, False),
        "seed/litserve-w1": (seed, 1, 64, False),
        "seed/litserve-unbatched": (seed, 1, 1, False),
        "resnet/litserve-w1": (resnet, 1, 64, cuda),
        "resnet/litserve-w2": (resnet, 2, 64, cuda),
    }
    # (key, how to start its server, images, clients); servers start one at a time, when their turn comes
    # Required runs first, optional ones last (the time guard skips from the end): (key, how to start its server,
    # images, clients); servers start one at a time, when their turn comes.
    plan = [
        ("seed/gpukit", lambda: gpukit_server(seed, a.device, workers, 64, False), img64, sorted({*curve, *seed_pts})),
        ("seed/litserve-w2", None, img64, sorted({*curve, *seed_pts})),
        ("seed/litserve-w1", None, img64, seed_pts),
        (
            "resnet/gpukit-nvjpeg",
            lambda: gpukit_server(resnet, a.device, workers, a.resnet_max_batch, cuda, "nvjpeg"),
            img224,
            sorted({*curve, *res_pts}),
        ),
        (
            "resnet/gpukit-pil",
            lambda: gpukit_server(resnet, a.device, workers, a.resnet_max_batch, cuda),
            img224,
            res_pts,
        ),
        # batching off, with the decoding that won at 256 clients (decided when its turn comes)
        (
            "resnet/gpukit-nobatch",
            lambda: gpukit_server(resnet, a.device, workers, 1, cuda, best_decode()),
            img224,
            res_pts,
        ),
        ("resnet/litserve-w1", None, img224, sorted({*curve, *res_pts})),
        ("resnet/litserve-w2", None, img224, res_pts),
        ("seed/litserve-unbatched", None, img64, seed_pts),
        ("seed/gpukit-nvjpeg", lambda: gpukit_server(seed, a.device, workers, 64, False, "nvjpeg"), img64, seed_pts),
        # nvImageCodec (issue 27): the hybrid backend (Huffman on host threads) and the GPU's JPEG engines
        *(
            (
                f"resnet/gpukit-{dec}",
                lambda dec=dec: gpukit_server(resnet, a.device, workers, a.resnet_max_batch, cuda, dec),
                img224,
                res_pts,
            )
            for dec in ("nvimgcodec", "nvimgcodec-hw")
        ),
        (
            "seed/gpukit-nvimgcodec",
            lambda: gpukit_server(seed, a.device, workers, 64, False, "nvimgcodec"),
            img64,
            seed_pts,
        ),
        # an HTTP worker a core and a 3 ms batch wait: on hosts with slow cores the seed CNN's 8 workers set the
        # pace (benchmarks/serve-headline_2026-12-06.md, the second part)
        (
            "seed/gpukit-wide",
            lambda: gpukit_server(seed, a.device, os.cpu_count() or 1, 64, False, extra=["--max-wait-ms", "3"]),
            img64,
            seed_pts,
        ),
    ]

    assert [k for k, *_ in plan] == list(KEYS)
    plan = [row for row in plan if only is None or row[0] in only]

    def best_decode() -> str:
        pil, nv = at(results, "resnet/gpukit-pil", res_pts[-1]), at(results, "resnet/gpukit-nvjpeg", res_pts[-1])
        if not pil and not nv:  # neither ran (--only): nvJPEG, the faster of the two when last measured
            return "nvjpeg" if cuda else "pil"
        return "nvjpeg" if nv and (not pil or nv["ok_rps"] > pil["ok_rps"]) else "pil"

    for key, start, images, points in plan:
        if start is None and a.skip_litserve:
            continue
        if time.monotonic() - T0 > BUDGET_S + 30:
            say(f"time guard: skipping {key}")
            continue
        if start is None:
            model, w, b, bf16 = lit[key]
            server = litserve_server(model, a.device, w, b, bf16)
        else:
            server = start()
        run_config(results, key, server, images, points, d)
        (a.out / f"{stem}.json").write_text(json.dumps({**results, "log": LOG}, indent=2))  # partial, if cut short
    results["summary"] = summarise(results)
    results["log"] = LOG
    (a.out / f"{stem}.json").write_text(json.dumps(results, indent=2))
    plot(results, a.out / f"{stem}.png")
    md = [
        "# gpukit serve vs LitServe" + (f" (--only {','.join(sorted(only))})" if only else ""),
        "",
        "ResNet-50 alone on the device (uint8 batches already there): "
        + (", ".join(f"{k} {v:,.0f}" for k, v in results["gpu_alone"].items() if k.endswith("img_per_s")) or "n/a"),
        "",
        f"device {a.device}, {os.cpu_count()} CPU cores, {workers} gpukit HTTP "
        f"workers, {d:g} s per point after a 1.5 s warm-up; load from `gpukit loadtest`.",
        "",
        *[f"- {s}" for s in results["summary"]],
        "",
        "| run | clients | req/s (200) | p50 ms | p99 ms | statuses | generator CPU (max per process) |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for key, run in results["runs"].items():
        for row in run.get("points", []):
            lat = row["latency_ms"]
            p50, p99 = (f"{lat[k]:.1f}" if lat[k] is not None else "n/a" for k in ("p50", "p99"))
            md.append(
                f"| {key} | {row['concurrency']} | {row['ok_rps']:,.0f} | {p50} | {p99} | "
                f"{row['statuses']} | {max(row['generator_cpu_per_process']):.0%} |"
            )
        if "error" in run:
            md.append(f"| {key} | — | failed: {run['error'][:80]} | | | | |")
    for key, c in WRK_AT.items():
        w = results.get("wrk" if key == "seed/gpukit" else f"wrk {key}")
        if w:
            md += ["", f"wrk cross-check ({key}, {c} connections): {w['rps']} req/s, p99 {w['p99_ms']} ms, "
                   f"non-2xx {w['non_2xx']}"]  # fmt: skip
    if results.get("ready_s"):
        md += ["", "Process start to /readyz 200: " + ", ".join(f"{k} {v} s" for k, v in results["ready_s"].items())]
    md += ["", "Server-Timing, mean ms per request (the server's own split):", ""]
    for key, run in results["runs"].items():
        for row in run.get("points", []):
            split = ", ".join(f"{k} {v:.2f}" for k, v in row.get("server_timing_mean_ms", {}).items())
            md.append(f"- {key} c={row['concurrency']}: {split or 'n/a'}")
    (a.out / f"{stem}.md").write_text("\n".join(md) + "\n")
    say(f"wrote {a.out}/{stem}.json, .png, .md")
    return 0


def versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("torch", "fastapi", "starlette", "uvicorn", "uvloop", "httptools", "litserve", "pillow", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    try:
        out["gpu"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out["gpu"] = "n/a"
    return out


if __name__ == "__main__":
    sys.exit(main())
