"""What a host charges for a wake-up, beside how fast its cores are: the serving benchmarks' hosts differ by up to
2x for the same server and GPU (benchmarks/serve-headline_2026-12-06.md), and a closed loop of 64 clients (the seed
CNN) is bound by its round trip, which is made of hand-offs between threads and processes. Prints one JSON object:

- ``cpu``: the CPU model, and the time of a fixed pure-Python loop (the cores' own speed): alone, and in each of
  ``--busy`` processes at once (default: all the cores but two; a server keeps a dozen threads busy, and on a shared
  host busy siblings, clocks and steal time can slow a core that is fast alone), with the host's steal share of
  that time from /proc/stat;
- ``thread``: round trips between two threads through ``threading.Event`` (the batcher's hand-offs);
- ``pipe``: round trips between two processes through a pair of pipes, blocking reads (the model process's pipes);
- ``tcp``: round trips between two processes over loopback TCP (a client and an HTTP worker).

Each is ``--n`` round trips after 200 of warm-up: p50, p99 and mean in µs.

    python3 benchmarks/scripts/host_wakeup_probe.py [--n 5000] [--out host-wakeup.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import threading
import time
from pathlib import Path

WARM = 200


def summary(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "p50_us": round(s[len(s) // 2] * 1e6, 1),
        "p99_us": round(s[int(len(s) * 0.99)] * 1e6, 1),
        "mean_us": round(statistics.fmean(s) * 1e6, 1),
    }


def loop_ms(_: object = None) -> float:
    """The fastest of 5 runs of a fixed pure-Python loop of 10⁶ steps, in ms."""
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i & 7
        times.append(time.perf_counter() - t0)
    return round(min(times) * 1e3, 1)


def cpu_ticks() -> list[int]:
    """/proc/stat's first line: user nice system idle iowait irq softirq steal …, in clock ticks."""
    return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def cpu(busy: int) -> dict[str, object]:
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")
    alone = loop_ms()
    before = cpu_ticks()
    with mp.get_context("fork").Pool(busy) as pool:
        loaded = sorted(pool.map(loop_ms, range(busy)))
    spent = [b - a for a, b in zip(before, cpu_ticks(), strict=True)]
    return {
        "model": model,
        "count": os.cpu_count(),
        "python_loop_1e6_ms": alone,
        "busy_processes": busy,
        "python_loop_1e6_ms_busy_median": loaded[len(loaded) // 2],
        "steal_share_busy": round(spent[7] / max(1, sum(spent)), 4) if len(spent) > 7 else None,
    }


def thread_round_trips(n: int) -> list[float]:
    ping, pong = threading.Event(), threading.Event()

    def echo() -> None:
        for _ in range(n + WARM):
            ping.wait()
            ping.clear()
            pong.set()

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    out = []
    for i in range(n + WARM):
        t0 = time.perf_counter()
        ping.set()
        pong.wait()
        pong.clear()
        if i >= WARM:
            out.append(time.perf_counter() - t0)
    t.join()
    return out


def _pipe_echo(r: int, w: int, n: int) -> None:
    for _ in range(n):
        os.write(w, os.read(r, 1))


def pipe_round_trips(n: int) -> list[float]:
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    p = mp.get_context("fork").Process(target=_pipe_echo, args=(r1, w2, n + WARM))
    p.start()
    out = []
    for i in range(n + WARM):
        t0 = time.perf_counter()
        os.write(w1, b"x")
        os.read(r2, 1)
        if i >= WARM:
            out.append(time.perf_counter() - t0)
    p.join()
    return out


def _tcp_echo(port: int, n: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            s.sendall(s.recv(1))


def tcp_round_trips(n: int) -> list[float]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        p = mp.get_context("fork").Process(target=_tcp_echo, args=(port, n + WARM))
        p.start()
        conn, _ = server.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out = []
        for i in range(n + WARM):
            t0 = time.perf_counter()
            conn.sendall(b"x")
            conn.recv(1)
            if i >= WARM:
                out.append(time.perf_counter() - t0)
    p.join()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5000, help="round trips per kind")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    ap.add_argument("--busy", type=int, default=max(1, (os.cpu_count() or 2) - 2), help="processes of the loaded run")
    a = ap.parse_args()
    result = {
        "cpu": cpu(a.busy),
        "thread": summary(thread_round_trips(a.n)),
        "pipe": summary(pipe_round_trips(a.n)),
        "tcp": summary(tcp_round_trips(a.n)),
        "n": a.n,
    }
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
