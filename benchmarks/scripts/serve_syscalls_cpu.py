"""System calls and CPU of `gpukit serve --workers N`'s HTTP workers per /v1/predict request, under `gpukit loadtest`.

    python benchmarks/scripts/serve_syscalls_cpu.py --src src --label after --json after.json
    python benchmarks/scripts/serve_syscalls_cpu.py --src /tmp/before/src --label before --json before.json

A real server from the tree ``--src`` (`--device cpu`, a seed-CNN checkpoint of 64 px made here, the seed CNN's
path: 64 px JPEGs decoded in the workers) and `gpukit loadtest` (``--clients`` keep-alive connections, one process):
- ``cpu``: for ``--seconds``, the workers' CPU (user + system, psutil) per request answered (the server's own
  ``gpukit_requests_total``), and requests per second;
- ``syscalls``: a second run with ``strace -c -f`` on every worker for ``--strace-s`` seconds: each system call's
  count per request answered in that window (strace slows the workers; the counts per request are what it is for).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from serve_accept_cpu import ROOT, http_workers, start, write_doc  # the server from a tree, its HTTP workers


def answered(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(m.group(1)) for m in re.finditer(r'gpukit_requests_total\{[^}]*route="/v1/predict"[^}]*\} (\S+)', text)
    )


def loadtest(src: Path, url: str, image: Path, clients: int, seconds: float) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "gpukit", "loadtest", url + "/v1/predict", "--image", str(image), "--concurrency",
           str(clients), "--duration", str(seconds), "--warmup", "0.5", "--processes", "1", "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def strace_counts(pids: list[int], seconds: float) -> dict[str, int]:
    procs = [subprocess.Popen(["strace", "-c", "-f", "-p", str(p)], stderr=subprocess.PIPE, text=True) for p in pids]
    time.sleep(seconds)
    counts: dict[str, int] = {}
    for p in procs:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(30)
        for line in err.splitlines():
            f = line.split()
            if len(f) >= 5 and f[0].replace(".", "").isdigit() and f[-1] != "total":
                counts[f[-1]] = counts.get(f[-1], 0) + int(f[3])
    return counts


def measure(args: argparse.Namespace, model: Path, image: Path) -> dict[str, Any]:
    proc, url = start(args.src, model, args.workers)
    try:
        workers = http_workers(proc)
        cpu = lambda: sum(sum(w.cpu_times()[:2]) for w in workers)  # noqa: E731
        lt = loadtest(args.src, url, image, args.clients, args.seconds + 1.0)
        time.sleep(1.0)  # past the warm-up
        n0, c0, t0 = answered(url), cpu(), time.monotonic()
        time.sleep(args.seconds)
        n1, c1, t1 = answered(url), cpu(), time.monotonic()
        lt.wait(60)
        out: dict[str, Any] = {"rps": (n1 - n0) / (t1 - t0), "worker_cpu_us": (c1 - c0) / (n1 - n0) * 1e6}
        if args.strace_s <= 0:
            return out
        lt = loadtest(args.src, url, image, args.clients, args.strace_s + 2.0)
        time.sleep(1.0)
        n0 = answered(url)
        counts = strace_counts([w.pid for w in workers], args.strace_s)
        n1 = answered(url)
        lt.wait(60)
        out["syscalls_per_request"] = {k: v / (n1 - n0) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}
        out["strace_requests"] = n1 - n0
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--label", default="run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--strace-s", type=float, default=2.0, help="0: no strace run")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "serve"))
    from serve_http_cpu import jpeg_64
    from serve_testdata import make_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        model = make_checkpoint(Path(tmp) / "ckpt", size=64)
        image = Path(tmp) / "a.jpg"
        image.write_bytes(jpeg_64())
        result = measure(args, model, image)
    calls = ", ".join(f"{k} {v:.2f}" for k, v in list(result.get("syscalls_per_request", {}).items())[:8])
    print(f"{args.label}: {result['rps']:.0f} req/s, workers' CPU {result['worker_cpu_us']:.0f} µs a request; "
          f"system calls a request: {calls}")  # fmt: skip
    write_doc(args, result, clients=args.clients)


if __name__ == "__main__":
    main()
