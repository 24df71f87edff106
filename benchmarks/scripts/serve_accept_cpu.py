"""How `gpukit serve --workers N` spreads connections over its HTTP workers, and what a new connection costs them.

    python benchmarks/scripts/serve_accept_cpu.py --src src --label after --json after.json
    python benchmarks/scripts/serve_accept_cpu.py --src /tmp/before/src --label before --json before.json

Starts a real server (`--device cpu`, a seed-CNN checkpoint made here) from the tree ``--src``, then:
- ``spread``: ``--trials`` times, opens ``--connections`` keep-alive connections one after another (each answered
  once, GET /healthz), counts each worker's ESTABLISHED connections (psutil), closes them, waits until every worker
  holds none; reports each trial's counts, the mean number of workers left with none, and the mean largest share;
- ``burst``: the same with all connections opened at once (asyncio), for each of ``--bursts``;
- ``churn``: ``--churn`` connections, each connect → GET /healthz (Connection: close) → closed, 1 and 8 at a time;
  the workers' CPU (user + system, psutil) per connection, and connections per second.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]


def start(src: Path, model: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    """`gpukit serve --workers N --device cpu` from the tree ``src`` → (its process, its URL once it serves)."""
    cmd = [sys.executable, "-m", "gpukit", "serve", str(model), "--port", "0", "--device", "cpu"]
    cmd += ["--workers", str(workers), "--quiet"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(src)})
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"serving (http://\S+)", line):
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
            return proc, m.group(1)
    raise RuntimeError(f"the server did not start (exit {proc.wait()})")


def http_workers(proc: subprocess.Popen[str]) -> list[psutil.Process]:
    kids = psutil.Process(proc.pid).children()
    return [k for k in kids if "spawn_main" in " ".join(k.cmdline())]


def held(workers: list[psutil.Process], port: int) -> list[int]:
    return sorted(
        sum(1 for c in w.net_connections("tcp") if c.status == "ESTABLISHED" and c.laddr.port == port) for w in workers
    )


def settle(workers: list[psutil.Process], port: int) -> None:
    deadline = time.monotonic() + 10
    while any(held(workers, port)) and time.monotonic() < deadline:
        time.sleep(0.02)


def one_by_one(host: str, port: int, n: int) -> list[http.client.HTTPConnection]:
    conns = []
    for _ in range(n):
        c = http.client.HTTPConnection(host, port, timeout=10)
        c.request("GET", "/healthz")
        c.getresponse().read()
        conns.append(c)
    return conns


async def at_once(host: str, port: int, n: int) -> list[Any]:
    async def one() -> Any:
        r, w = await asyncio.open_connection(host, port)
        w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await r.readuntil(b"\r\n\r\n")
        return w

    return await asyncio.gather(*(one() for _ in range(n)))


async def churn(host: str, port: int, n: int, at_a_time: int) -> None:
    async def one() -> None:
        r, w = await asyncio.open_connection(host, port)
        w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await r.read()
        w.close()

    async def lane(k: int) -> None:
        for _ in range(k):
            await one()

    await asyncio.gather(*(lane(n // at_a_time) for _ in range(at_a_time)))


def summary(counts: list[list[int]]) -> dict[str, Any]:
    return {
        "counts": counts,
        "mean_idle_workers": sum(c.count(0) for c in counts) / len(counts),
        "mean_largest": sum(max(c) for c in counts) / len(counts),
    }


def measure(args: argparse.Namespace, model: Path) -> dict[str, Any]:
    proc, url = start(args.src, model, args.workers)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    p = int(port)
    try:
        workers = http_workers(proc)
        out: dict[str, Any] = {}
        spread = []
        for _ in range(args.trials):
            conns = one_by_one(host, p, args.connections)
            time.sleep(0.05)
            spread.append(held(workers, p))
            for c in conns:
                c.close()
            settle(workers, p)
        out["spread"] = summary(spread)
        bursts = {}
        for n in args.bursts:
            counts = []
            for _ in range(3):
                writers = asyncio.run(at_once_and_count(host, p, n, workers))
                counts.append(writers)
                settle(workers, p)
            bursts[str(n)] = summary(counts)
        out["burst"] = bursts
        cpu = lambda: sum(sum(w.cpu_times()[:2]) for w in workers)  # noqa: E731
        out["churn"] = {}
        for k in (1, 8):
            asyncio.run(churn(host, p, 20 * k, k))  # warm-up
            c0, t0 = cpu(), time.perf_counter()
            asyncio.run(churn(host, p, args.churn, k))
            dt, dc = time.perf_counter() - t0, cpu() - c0
            out["churn"][str(k)] = {"per_s": args.churn / dt, "worker_cpu_us": dc / args.churn * 1e6}
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


async def at_once_and_count(host: str, port: int, n: int, workers: list[psutil.Process]) -> list[int]:
    writers = await at_once(host, port, n)
    await asyncio.sleep(0.05)
    counts = held(workers, port)
    for w in writers:
        w.close()
    return counts


def write_doc(args: argparse.Namespace, result: dict[str, Any], **setup: Any) -> None:
    """The run's machine, label and setup beside ``result``, to ``--json`` when given."""
    doc = {"label": args.label, "python": sys.version.split()[0], "machine": platform.machine(),
           "cpus": os.cpu_count(), "workers": args.workers, **setup, **result}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--label", default="run")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--bursts", type=int, nargs="*", default=[64, 256])
    ap.add_argument("--churn", type=int, default=3000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "serve"))
    from serve_testdata import make_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        model = make_checkpoint(Path(tmp) / "ckpt")
        result = measure(args, model)
    s = result["spread"]
    print(f"{args.label}: {args.connections} connections one by one on {args.workers} workers, {args.trials} trials: "
          f"{s['mean_idle_workers']:.2f} workers idle, largest share {s['mean_largest']:.2f} (even: "
          f"{args.connections / args.workers:g})")  # fmt: skip
    for n, b in result["burst"].items():
        print(f"{args.label}: {n} at once: {b['counts']}")
    for k, c in result["churn"].items():
        print(f"{args.label}: churn {k} at a time: {c['per_s']:.0f} connections/s, {c['worker_cpu_us']:.0f} µs "
              f"of workers' CPU a connection")  # fmt: skip
    write_doc(args, result, connections=args.connections)


if __name__ == "__main__":
    main()
