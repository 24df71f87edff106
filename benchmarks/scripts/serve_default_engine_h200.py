"""`gpukit serve` with no --engine on CUDA (the default, auto: every engine built, gated and timed at a cold start),
ResNet-50 224 px JPEGs, nvJPEG, bf16, --max-batch 128, 8 HTTP workers: the time to /readyz, the engine it chose and
why, then `gpukit loadtest` (256 clients, 10 s) with py-spy sampling the model process's GIL holder for 4 s inside it,
then wrk (-t4 -c256, 10 s, if .deb/usr/bin/wrk exists) on the same server. Writes $OUT/default_engine.json and the
collapsed py-spy stacks.

    PYTHONPATH=src python3 benchmarks/scripts/serve_default_engine_h200.py --out /tmp/o   # the GPU machine
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import serve_h200 as sh  # noqa: E402  (images, checkpoint, server wrapper, wrk)
import serve_profile as sp  # noqa: E402  (process tree, py-spy)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ready-s", type=float, default=400.0)
    p.add_argument("--device", default="cuda", help="cpu: the script's own smoke run (eager there)")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/serve_default_work")
    shutil.rmtree(work, ignore_errors=True)
    images = sh.make_images(work / "img224", 224, 256)
    ckpt = sh.checkpoint(work / "resnet50", "resnet50", 224)
    port = sh.free_port()
    # no --engine: the default
    cmd = [sys.executable, "-m", "gpukit", "serve", str(ckpt), "--device", a.device, "--port", str(port),
           "--workers", "8", "--max-batch", "128", "--max-wait-ms", "2", "--queue-size", "4096", "--timeout-s", "30",
           "--decode", "nvjpeg", "--amp", "bf16", "--quiet"]  # fmt: skip
    t0 = time.monotonic()
    server = sh.Server("default-engine", cmd, f"http://127.0.0.1:{port}/readyz", f"http://127.0.0.1:{port}/v1/predict")
    ready = server.wait(a.ready_s)
    result: dict = {"cmd": cmd, "ready": ready, "ready_s": round(time.monotonic() - t0, 1)}
    print(f"ready {ready} after {result['ready_s']} s", flush=True)
    if ready:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/model", timeout=5) as r:
            result["engine"] = json.load(r).get("engine")
        load = subprocess.Popen(
            [sys.executable, "-m", "gpukit", "loadtest", server.url, "--image", str(images), "--concurrency", "256",
             "--duration", "10", "--warmup", "1.5", "--json"],
            env=sh.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        time.sleep(4.0)
        pids = sp.tree(server.proc.pid)
        model_pid = sp.largest(sp.threads(pids))
        spy = sp.spy(model_pid, a.out / "model-gil.txt", 4, "--gil")
        if spy is not None:
            spy.wait()
        text = load.communicate(timeout=120)[0]
        loadtest = json.JSONDecoder().raw_decode(text[text.index("{") :])[0]  # warnings may follow it
        (a.out / "loadtest.txt").write_text(text)
        result["loadtest"] = {k: loadtest.get(k) for k in ("throughput_rps", "latency_ms", "statuses",
                                                           "server_timing_mean_ms", "generator_saturated")}  # fmt: skip
        result["model_gil_top"] = sp.top(a.out / "model-gil.txt", 30)
        result["wrk"] = sh.wrk_check(server.url, next(images.rglob("*.jpg")), 10, 256)
        lt, w = result["loadtest"], result["wrk"] or {}
        print(f"loadtest {lt['throughput_rps']} req/s p99 {lt['latency_ms']['p99']} ms; "
              f"wrk {w.get('rps')} req/s p99 {w.get('p99_ms')} ms", flush=True)  # fmt: skip
    server.stop()
    result["log_tail"] = Path(f"/tmp/serve_h200_{server.name}.log").read_text()[-4000:]
    (a.out / "default_engine.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
