"""Where `gpukit serve`'s CPU goes under load: per-thread CPU of every server process, and py-spy samples of the
model process (the threads holding the GIL, and every thread that is not idle) and of one HTTP worker, while
`gpukit loadtest` drives the server at its headline client count (issue 27).

    PYTHONPATH=src python3 benchmarks/scripts/serve_profile.py --out /tmp/prof            # the GPU machine
    PYTHONPATH=src python3 benchmarks/scripts/serve_profile.py --out /tmp/prof --device cpu --only seed/pil

py-spy (``pip install py-spy``) must be on PATH for the samples; without it only the thread CPU is recorded.
Per configuration, in $OUT/<name>/: ``threads.json`` (CPU s per wall s of each thread in the window, by process and
thread name), ``model-gil.txt``, ``model-busy.txt``, ``worker.txt`` (py-spy's collapsed stacks), ``loadtest.json``;
and $OUT/summary.md with the top frames of each. Weights are random: throughput does not depend on them.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import serve_h200 as sh  # noqa: E402  (its image maker, checkpoints, server wrapper and process-tree reading)

CONFIGS = {  # name: (model, image size, decode, max batch, bf16, clients)
    "resnet/nvjpeg": ("resnet50", 224, "nvjpeg", 128, True, 256),
    "resnet/pil": ("resnet50", 224, "pil", 128, True, 256),
    "seed/pil": ("seed-cnn", 64, "pil", 64, False, 64),
    "seed/nvjpeg": ("seed-cnn", 64, "nvjpeg", 64, False, 64),
}


def threads(pids: list[int]) -> dict[tuple[int, int], tuple[str, float]]:
    """(pid, tid) → (thread name, CPU seconds) for every thread of ``pids``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("[0-9]*"):
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[(pid, int(task.name))] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def host_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs of the host, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]  # guest is in user
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def batches(predict_url: str) -> tuple[float, float]:
    """(images, batches) so far, from the server's /metrics (gpukit_batch_size's sum and count)."""
    import urllib.request

    url = predict_url.rsplit("/v1/", 1)[0] + "/metrics"
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return 0.0, 0.0
    got = {"sum": 0.0, "count": 0.0}
    for line in text.splitlines():
        for part in got:
            if line.startswith(f"gpukit_batch_size_{part} "):
                got[part] += float(line.split()[1])
    return got["sum"], got["count"]


def largest(by_thread: dict[tuple[int, int], tuple[str, float]]) -> int:
    """The model process among ``threads(pids)``'s processes: torch's threads make it the one with the most."""
    return collections.Counter(pid for pid, _ in by_thread).most_common(1)[0][0]


def tree(pgid: int) -> list[int]:
    return sorted(sh.tree_cpu(pgid))


def py_names(pid: int) -> dict[int, str]:
    """Python thread names by OS thread id, from ``py-spy dump`` (Python does not name its OS threads)."""
    if not shutil.which("py-spy"):
        return {}
    proc = subprocess.run(["py-spy", "dump", "--pid", str(pid), "--nonblocking"], capture_output=True, text=True)
    names = {}
    for line in proc.stdout.splitlines():  # Thread 12345 (active+gil): "gpukit-batcher-prepare"
        if line.startswith("Thread ") and '"' in line:
            tid = line.split()[1]
            names[int(tid, 16) if tid.startswith("0x") else int(tid)] = line.split('"')[1]
    return names


def spy(pid: int, out: Path, seconds: float, *flags: str) -> subprocess.Popen[bytes] | None:
    if not shutil.which("py-spy"):
        return None
    cmd = ["py-spy", "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "200"]
    cmd += ["--format", "raw", "--output", str(out), "--nonblocking", *flags]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def top(collapsed: Path, n: int = 25) -> list[tuple[str, int]]:
    """The leaf frames with the most samples (self time), and the total."""
    if not collapsed.exists():
        return []
    leaf: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        leaf[";".join(frames[-2:])] += int(count)
        total += int(count)
    return [("total", total), *leaf.most_common(n)]


def profile(
    name: str,
    model_dir: Path,
    images: Path,
    device: str,
    out: Path,
    duration: float,
    window: float,
    extra: list[str],
    sampled: bool = True,  # py-spy on the model process and one worker (False: thread CPU only, less perturbed)
    native: bool = False,  # the model process's busy threads with their native (C/C++) frames too
) -> dict:
    _model, _size, decode, max_batch, bf16, clients = CONFIGS[name]
    # extra (--serve-args): the same server with more options, a knob measured against the default
    server = sh.gpukit_server(model_dir, device, sh_workers(), max_batch, bf16 and device == "cuda", decode, extra)
    if not server.wait():
        return {"error": "did not start", "log": server.tail()}
    here = out / name.replace("/", "-")
    here.mkdir(parents=True, exist_ok=True)
    load = subprocess.Popen(
        [sys.executable, "-m", "gpukit", "loadtest", server.url, "--image", str(images), "--concurrency", str(clients),
         "--duration", str(duration), "--warmup", "1", "--json"],
        env=sh.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    time.sleep(3.0)  # the generator's processes up and the server's queues full
    pids = tree(server.proc.pid)
    before = threads(pids)
    model_pid = largest(before)
    cpu0 = sh.tree_cpu(server.proc.pid)
    time.sleep(0.5)
    cpu1 = sh.tree_cpu(server.proc.pid)
    others = [p for p in pids if p not in (model_pid, server.proc.pid)]
    worker_pid = max(others, key=lambda p: cpu1.get(p, 0.0) - cpu0.get(p, 0.0), default=server.proc.pid)
    spies = [
        spy(model_pid, here / "model-gil.txt", window, "--gil"),
        spy(model_pid, here / "model-busy.txt", window, "--threads", *(["--native"] if native else [])),
        spy(worker_pid, here / "worker.txt", window),
    ] if sampled else []  # fmt: skip
    t0, busy0, batch0 = time.monotonic(), host_busy(), batches(server.url)
    for s in spies:
        if s is not None:
            s.wait()
    if not sampled:
        time.sleep(window)
    wall, busy1, batch1 = time.monotonic() - t0, host_busy(), batches(server.url)
    after = threads(pids)
    names = {**py_names(model_pid), **py_names(worker_pid)}
    rows = []
    for key, (tname, cpu) in after.items():
        used = (cpu - before.get(key, (tname, 0.0))[1]) / wall
        if used >= 0.01:
            pid, tid = key
            role = "model" if pid == model_pid else "worker" if pid != server.proc.pid else "parent"
            rows.append({"pid": pid, "role": role, "tid": tid, "name": names.get(tid, tname), "cpu": round(used, 3)})
    rows.sort(key=lambda r: -r["cpu"])
    text = load.communicate(timeout=duration + 120)[0]
    server.stop()
    try:
        result = json.loads(text[text.index("{") :])
    except ValueError:
        result = {"raw": text[-2000:]}
    (here / "loadtest.json").write_text(json.dumps(result, indent=1))
    (here / "threads.json").write_text(json.dumps(rows, indent=1))
    return {
        "rps": result.get("throughput_rps"),
        "p99_ms": (result.get("latency_ms") or {}).get("p99"),
        "timing_ms": result.get("server_timing_mean_ms"),
        "threads": rows[:40],
        "model_cpu": round(sum(r["cpu"] for r in rows if r["role"] == "model"), 2),
        "worker_cpu": round(sum(r["cpu"] for r in rows if r["role"] == "worker"), 2),
        "mean_batch": round((batch1[0] - batch0[0]) / max(1.0, batch1[1] - batch0[1]), 1),
        "host_busy": round((busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]), 3),  # of all the host's CPUs
        "top": {f: top(here / f) for f in ("model-gil.txt", "model-busy.txt", "worker.txt")},
    }


def sh_workers() -> int:
    return max(2, min(8, (os.cpu_count() or 4) // 2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--only", default=",".join(CONFIGS), help="comma-separated names of CONFIGS")
    p.add_argument("--duration", type=float, default=14.0, help="loadtest's measured seconds per configuration")
    p.add_argument("--window", type=float, default=8.0, help="seconds sampled, inside the loadtest")
    p.add_argument("--src", type=Path, default=None, help="serve this gpukit source folder instead (a before/after)")
    p.add_argument("--serve-args", default="", help="more `gpukit serve` options, e.g. '--decode-threads 2'")
    p.add_argument("--no-spy", action="store_true", help="no py-spy samples: thread CPU and throughput only")
    p.add_argument("--native", action="store_true", help="py-spy --native for the model process's busy threads")
    p.add_argument("--keep-work", action="store_true", help="reuse the checkpoints (and engine caches) of a run before")
    a = p.parse_args()
    if a.src is not None:
        src = a.src.resolve()
        sh.env = lambda: {**os.environ, "PYTHONPATH": f"{src}:{os.environ.get('PYTHONPATH', '')}"}
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/serve_profile_work")
    if not a.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    results: dict = {"device": a.device, "cpu_count": os.cpu_count(), "workers": sh_workers(), "runs": {}}
    for name in a.only.split(","):
        model, size = CONFIGS[name][:2]
        images = work / f"img{size}"
        if not images.exists():
            sh.make_images(images, size, 256)
        ckpt = work / model
        if not ckpt.exists():
            sh.checkpoint(ckpt, model, size)
        results["runs"][name] = profile(
            name, ckpt, images, a.device, a.out, a.duration, a.window, a.serve_args.split(), not a.no_spy, a.native
        )
        run = results["runs"][name]
        print(f"{name}: {run.get('rps')} req/s, p99 {run.get('p99_ms')}, model CPU {run.get('model_cpu')}, "
              f"workers {run.get('worker_cpu')}, host {run.get('host_busy')}, batch {run.get('mean_batch')}",
              flush=True)  # fmt: skip
    (a.out / "profile.json").write_text(json.dumps(results, indent=1))
    lines = []
    for name, run in results["runs"].items():
        lines.append(f"## {name}: {run.get('rps')} req/s, p99 {run.get('p99_ms')} ms, timing {run.get('timing_ms')}")
        lines += [f"- {r['role']} {r['pid']} {r['name']}: {r['cpu']}" for r in run.get("threads", [])[:20]]
        for f, rows in run.get("top", {}).items():
            lines.append(f"### {f}")
            lines += [f"    {c:6d}  {frame}" for frame, c in rows]
    (a.out / "summary.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
