"""Why the same ResNet-50 server, started again on the same host, serves 10,500 req/s one time and 14,000 the next
(benchmarks/serve-restarts_h100_2026-12-06.md; written then, not yet run on a GPU). Starts `gpukit serve`
(ResNet-50, nvjpeg, bf16, max batch 128, 256 clients; or the seed CNN, 64 px, Pillow, max batch 64, 64 clients;
8 HTTP workers, the engine of ``GPUKIT_SERVE_ENGINE``) once a round and loads each with `gpukit loadtest`. For each
start it records, beside req/s and the server's stage times, where every
thread of the server ran: its CPU share over the loaded window and the CPUs the kernel put it on
(``/proc/<pid>/task/<tid>/stat``, sampled every 0.25 s), with the model process's thread names from ``py-spy dump``
(``SERVE_PYSPY``, optional). Also the host's topology: which CPUs share a core, NUMA nodes, the GPU's CPU affinity.
Each round places the processes one way (``--order``, in turns):
- ``pinned``: `gpukit serve --model-cpus M` (M: this script's ``--model-cpus``) places them itself
  (``gpukit.serve.cpus``); the load generator goes where the kernel puts it. (Its JSON of 2026-12-06 says ``auto``:
  then the default, which chose 4 on those hosts, as each round's log line says.)
- ``free``: no ``--model-cpus``, the kernel's choice;
- ``split``: the model process's threads on the first M CPUs, the HTTP workers and the load generator on the rest
  (``sched_setaffinity`` on every thread from here, once the server is ready);
- ``nice``: the HTTP workers' threads at nice +5.
With ``.deb/usr/bin/wrk`` present, wrk loads each server too, right after ``gpukit loadtest``.
    python3 benchmarks/scripts/serve_placement_probe.py --out /tmp/r/placement --order "free split nice" --budget-s 180
    python3 benchmarks/scripts/serve_placement_probe.py --out /tmp/r/seed --model seed --order "pinned free pinned free"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_h200 as sh


def topology() -> dict:
    """Which CPUs share a core, the NUMA nodes, and the GPU's CPU affinity (``nvidia-smi topo -m``)."""
    cpus = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*"), key=lambda p: int(p.name[3:]))
    doc: dict = {"siblings": {p.name: (p / "topology/thread_siblings_list").read_text().strip() for p in cpus}}
    for key, cmd in (("lscpu", ["lscpu", "-e=CPU,CORE,SOCKET,NODE"]), ("topo", ["nvidia-smi", "topo", "-m"])):
        try:
            doc[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            doc[key] = f"{cmd[0]}: {exc}"
    return doc


def threads(pgid: int) -> dict[int, tuple[int, str, float, int]]:
    """tid → (pid, comm, CPU seconds, the CPU it last ran on) for every thread of the process group."""
    tick = os.sysconf("SC_CLK_TCK")
    return {
        int(stat.parent.name): (int(stat.parents[2].name), comm, (int(f[11]) + int(f[12])) / tick, int(f[36]))
        for stat, (comm, f) in sh.group_stats(pgid, "[0-9]*/task/[0-9]*/stat").items()
    }


def names(pid: int) -> dict[int, str]:
    """tid → Python thread name, from ``py-spy dump`` (empty without SERVE_PYSPY)."""
    binary = os.environ.get("SERVE_PYSPY")
    if not binary:
        return {}
    text = subprocess.run([binary, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True,
                          timeout=30).stdout  # fmt: skip
    return {int(m.group(1)): m.group(2) for m in re.finditer(r'Thread (\d+) \([^)]*\): "([^"]+)"', text)}


def place(mode: str, pid: int, model_cpus: int) -> dict:
    """Puts the server's threads where ``mode`` says (see the header); returns what it did. The probe itself (and so
    the load generator it starts next) goes on the HTTP workers' CPUs in ``split``."""
    tids = {tid: owner for tid, (owner, *_) in threads(pid).items()}
    cpus = sorted(os.sched_getaffinity(0))
    if mode == "split":
        mine, rest = set(cpus[:model_cpus]), set(cpus[model_cpus:])
        for tid, owner in tids.items():
            os.sched_setaffinity(tid, mine if owner == pid else rest)
        os.sched_setaffinity(0, rest)
        return {"model_cpus": sorted(mine), "other_cpus": sorted(rest)}
    if mode == "nice":
        for tid, owner in tids.items():
            if owner != pid:
                os.setpriority(os.PRIO_PROCESS, tid, 5)  # per thread on Linux
        return {"workers_nice": 5}
    return {}


def one_round(model: Path, images: Path, duration: float, mode: str, model_cpus: int, seed: bool) -> dict:
    extra = ["--model-cpus", str(model_cpus)] if mode == "pinned" else []
    if seed:
        server, clients = sh.gpukit_server(model, "cuda", 8, 64, False, "pil", extra), 64
    else:
        server, clients = sh.gpukit_server(model, "cuda", 8, 128, True, "nvjpeg", extra), 256
    everywhere = os.sched_getaffinity(0)
    try:
        if not server.wait():
            return {"error": "did not start", "log": server.tail()}
        pid, result = server.proc.pid, {"mode": mode, "placed": place(mode, server.proc.pid, model_cpus)}
        load = threading.Thread(target=lambda: result.update(sh.loadtest(server.url, images, clients, duration)))
        hist0 = sh.batch_sizes(server)
        load.start()
        time.sleep(3.5)  # the generators' start and the 1.5 s warm-up
        first, seen = threads(pid), {}
        t0 = time.monotonic()
        while load.is_alive() and time.monotonic() - t0 < duration - 2.5:
            for tid, (_, _, _, cpu) in threads(pid).items():
                seen.setdefault(tid, Counter())[cpu] += 1
            time.sleep(0.25)
        last, wall = threads(pid), time.monotonic() - t0
        tid_names = names(pid)
        load.join()
        hist1 = sh.batch_sizes(server)
        wrk = sh.wrk_check(server.url, next(images.rglob("*.jpg")), duration, clients)
        rows = []
        for tid, (p, comm, cpu_s, _) in last.items():
            busy = (cpu_s - first.get(tid, (p, comm, 0.0, 0))[2]) / wall  # a thread started since: all of it
            if busy >= 0.02:
                where = dict(seen.get(tid, Counter()).most_common(4))
                rows.append({"pid": p, "tid": tid, "name": tid_names.get(tid, comm), "cpu_share": round(busy, 3),
                             "model": p == pid, "cpus": where})  # fmt: skip
        n = hist1.get("count", 0.0) - hist0.get("count", 0.0)
        t = result.get("server_timing_mean_ms", {})
        return {"mode": mode, "placed": result.get("placed"),
                "rps": result.get("throughput_rps"), "ok_rps": result.get("ok_rps"), "statuses": result.get("statuses"),
                "p99_ms": result.get("latency_ms", {}).get("p99"),
                "mean_batch": (hist1.get("sum", 0.0) - hist0.get("sum", 0.0)) / n if n else None,
                "stages_ms": {k: round(v, 2) for k, v in t.items()},
                "wrk": {k: v for k, v in (wrk or {}).items() if k != "stdout_tail"} or None,
                "log": server.tail()[-600:],
                "threads": sorted(rows, key=lambda r: -r["cpu_share"])}  # fmt: skip
    finally:
        os.sched_setaffinity(0, everywhere)
        server.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--order", default="free split nice free split nice", help="one placement a round, in turns")
    p.add_argument("--model", choices=("resnet", "seed"), default="resnet")
    p.add_argument("--model-cpus", type=int, default=4, help="CPUs the model process gets in a pinned or split round")
    p.add_argument("--duration", type=float, default=7.0)
    p.add_argument("--budget-s", type=float, default=180.0, help="no round starts after this many seconds")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    t_start, work = time.monotonic(), Path("/tmp/serve_h200_work")
    seed = a.model == "seed"
    if seed:
        images = sh.make_images(work / "img64", 64, 256)
        model, how = sh.train_seed(images, work / "seed-run", "cuda", False)
    else:
        images, how = sh.make_images(work / "img224", 224, 256), "random weights"
        model = sh.checkpoint(work / "resnet50", "resnet50", 224)
    doc: dict = {"model": a.model, "checkpoint": how, "topology": topology(),
                 "engine": os.environ.get("GPUKIT_SERVE_ENGINE", "eager"), "rounds": []}  # fmt: skip
    for i, mode in enumerate(a.order.split()):
        if time.monotonic() - t_start > a.budget_s:
            break
        r = one_round(model, images, a.duration, mode, a.model_cpus, seed)
        doc["rounds"].append(r)
        (a.out / f"placement-{a.model}.json").write_text(json.dumps(doc, indent=1))
        model_threads = [(t["name"], t["cpu_share"], list(t["cpus"])) for t in r.get("threads", []) if t["model"]]
        print(i, mode, r.get("rps"), r.get("p99_ms"), (r.get("wrk") or {}).get("rps"), r.get("placed"),
              r.get("mean_batch"), {k: r.get("stages_ms", {}).get(k) for k in ("prep", "infer")},
              model_threads[:5], flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
