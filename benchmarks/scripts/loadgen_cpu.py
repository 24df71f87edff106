"""The load generator's own CPU a request, for two or more gpukit source trees side by side, alternating rounds.

A fixed-answer HTTP server (uvloop protocol, the answer a seed-CNN server sends: 420 bytes of JSON and a
nine-stage Server-Timing header) runs pinned to one core; ``gpukit loadtest`` (one process, closed loop) runs pinned
to another, from each ``--src`` tree in turn. The generator saturates its core, so its CPU a request is what it
costs per request, and the req/s is its ceiling on that core. Prints and writes one JSON object.

    git worktree add /tmp/old <rev>
    python3 benchmarks/scripts/loadgen_cpu.py --src old=/tmp/old/src --src new=src [--rounds 3] [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_h200 import free_port

SERVER = textwrap.dedent(
    r"""
    import asyncio, sys
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    TIMING = b"read;dur=0.037, decode;dur=0.129, to_batch;dur=0.484, queue;dur=0.960, prep;dur=0.469, " \
             b"infer;dur=0.438, from_batch;dur=0.888, encode;dur=0.013, total;dur=3.422"
    ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 420\r\nserver-timing: " \
             + TIMING + b"\r\n\r\n" + b"x" * 420
    NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    class Answer(asyncio.Protocol):
        def connection_made(self, t):
            self.t, self.buf = t, bytearray()
        def data_received(self, data):
            self.buf += data
            while (end := self.buf.find(b"\r\n\r\n")) >= 0:
                head = bytes(self.buf[:end]).lower()
                at = head.find(b"content-length:")
                if at < 0:  # loadtest's GET /v1/model
                    self.t.write(NOT_FOUND)
                    self.t.close()
                    return
                stop = head.find(b"\r\n", at)
                need = end + 4 + int(head[at + 15 : stop if stop >= 0 else None])
                if len(self.buf) < need:
                    return
                del self.buf[:need]
                self.t.write(ANSWER)
    async def main():
        server = await asyncio.get_running_loop().create_server(Answer, "127.0.0.1", int(sys.argv[1]))
        await server.serve_forever()
    run(main())
    """
)

CLIENT = textwrap.dedent(
    """
    import json, pathlib, sys
    from gpukit.serve.loadtest import LoadSpec, run_loadtest
    img = pathlib.Path(sys.argv[2])
    r = run_loadtest(LoadSpec(url=f"http://127.0.0.1:{sys.argv[1]}/v1/predict", images=[img],
                              concurrency=int(sys.argv[3]), duration_s=float(sys.argv[4]), warmup_s=0.5, processes=1))
    print(json.dumps({"rps": r.throughput_rps, "cpu_us_per_request": r.generator_cpu_s / r.sent * 1e6,
                      "cpu_share": r.generator_cpu_per_process[0], "p50_ms": r.latency_ms["p50"],
                      "statuses": r.statuses, "timing_total_ms": r.server_timing_mean_ms.get("total")}))
    """
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", action="append", required=True, help="NAME=PATH of a gpukit src folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    trees = dict(s.split("=", 1) for s in args.src)
    cores = sorted(os.sched_getaffinity(0))
    server_core, client_core = str(cores[0]), str(cores[-1])
    port = free_port()
    img = Path("/tmp/loadgen_cpu.jpg")
    img.write_bytes(b"\xff\xd8\xff" + b"x" * 2000)
    server = subprocess.Popen(["taskset", "-c", server_core, sys.executable, "-c", SERVER, str(port)])
    time.sleep(1.0)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    try:
        for _ in range(args.rounds):
            for name, src in trees.items():
                env = os.environ | {"PYTHONPATH": str(Path(src).resolve())}
                cmd = ["taskset", "-c", client_core, sys.executable, "-c", CLIENT, str(port), str(img),
                       str(args.concurrency), str(args.duration)]  # fmt: skip
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
                runs[name].append(json.loads(out.strip().splitlines()[-1]))
                print(name, runs[name][-1], flush=True)
    finally:
        server.terminate()
        server.wait(10)
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    doc = {
        "python": sys.version.split()[0],
        "cpu": next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), ""),
        "cores": {"server": server_core, "client": client_core},
        "concurrency": args.concurrency,
        "duration_s": args.duration,
        "runs": runs,
        "median_cpu_us_per_request": {
            name: sorted(r["cpu_us_per_request"] for r in rs)[len(rs) // 2] for name, rs in runs.items()
        },
        "median_rps": {name: sorted(r["rps"] for r in rs)[len(rs) // 2] for name, rs in runs.items()},
    }
    print(json.dumps({k: doc[k] for k in ("median_cpu_us_per_request", "median_rps")}))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
