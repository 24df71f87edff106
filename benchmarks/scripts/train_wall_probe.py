"""Where a short `gpukit train` run's wall time goes, on the machine it runs on (a diagnostic beside train_h200.py).

    OUT=… PYTHONPATH=src python3 benchmarks/scripts/train_wall_probe.py [--images 20480]

1. Fresh processes, each timed from outside: ``import torch`` (twice: the second with a warm page cache),
   + ``torch.cuda.init()``, + a first CUDA tensor, + a first conv forward/backward with cuDNN autotuning on and off,
   + a first matmul; and the interpreter teardown after ``import torch``.
2. The 4-epoch CLI run of train_h200.py twice (wall clock outside the process, and the run's own split).
   The same with --no-cudnn-benchmark, and throughput at batch 32 / 256 with cuDNN autotuning on and off.
3. The same run in-process under cProfile: the functions with the most cumulative time, to ``train-profile.txt``.
Writes train-wall-probe.json and train-profile.txt into $OUT.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_throughput as tt

SNIPPETS = {
    "python": "pass",
    "import torch": "import torch",
    "import torch (again)": "import torch",
    "+ cuda.init": "import torch; torch.cuda.init()",
    "+ first tensor": "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()",
    "+ conv fwd/bwd, benchmark on": (
        "import torch; torch.backends.cudnn.benchmark = True\n"
        "m = torch.nn.Conv2d(3, 32, 3).cuda(); x = torch.randn(32, 3, 64, 64, device='cuda')\n"
        "m(x).sum().backward(); torch.cuda.synchronize()"
    ),
    "+ conv fwd/bwd, benchmark off": (
        "import torch\n"
        "m = torch.nn.Conv2d(3, 32, 3).cuda(); x = torch.randn(32, 3, 64, 64, device='cuda')\n"
        "m(x).sum().backward(); torch.cuda.synchronize()"
    ),
    "+ first matmul": ("import torch; a = torch.randn(256, 256, device='cuda'); (a @ a).sum().item()"),
}


def fresh(code: str) -> dict:
    marker = "import time as _t, sys as _s; _s.stderr.write(f'END {_t.time()}\\n')"
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-c", f"{code}\n{marker}"], capture_output=True, text=True, check=False)
    t1 = time.time()
    end = [float(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("END ")]
    return {"wall_s": t1 - t0, "teardown_s": (t1 - end[0]) if end else None, "rc": proc.returncode,
            "err": proc.stderr[-400:] if proc.returncode else ""}  # fmt: skip


def cli(root: Path, out: Path, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "gpukit", "train", str(root), "--model", "seed-cnn", "--epochs", "4", "--min-steps",
           "0", "--device", "cuda", "--out", str(out), "--json", *extra]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode:
        return {"error": proc.stderr[-2000:]}
    t = json.loads(proc.stdout)["times"]
    need = t["train_s"] + t["decode_s"]
    return {"wall_s": wall, "times": t, "ratio": wall / need}


def profile(root: Path, out: Path) -> str:
    from gpukit.cli import main

    prof = cProfile.Profile()
    prof.enable()
    main(["train", str(root), "--model", "seed-cnn", "--epochs", "4", "--min-steps", "0", "--device", "cuda",
          "--out", str(out), "--quiet"])  # fmt: skip
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).sort_stats("cumulative")
    stats.print_stats(60)
    stats.sort_stats("tottime").print_stats(30)
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=20_480)
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "benchmarks/out"))
    out.mkdir(parents=True, exist_ok=True)
    doc: dict = {"fresh": {}}
    for name, code in SNIPPETS.items():
        doc["fresh"][name] = fresh(code)
        print(f"{name:32s} {doc['fresh'][name]}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="gpukit-wall-"))
    root = tmp / "data"
    doc["generate_s"] = tt.generate(root, args.images)
    for i, extra in enumerate([(), ("--no-cudnn-benchmark",), (), ("--no-cudnn-benchmark",)]):
        doc[f"cli_{i}"] = {"extra": extra, **cli(root, tmp / f"run{i}", *extra)}
        print(f"cli run {i}: {doc[f'cli_{i}']}", flush=True)
    for bench in (True, False):  # throughput as train_h200.py measures it, with cuDNN autotuning on and off
        for batch in (32, 256):
            row = tt.gpukit_summary(root, batch, 6, tmp / f"tp-{batch}-{bench}", cudnn_benchmark=bench)
            doc[f"throughput_{batch}_benchmark_{bench}"] = row
            print(f"throughput batch {batch} cudnn.benchmark {bench}: {tt.num(row.get('images_per_s'))}", flush=True)
    (out / "train-profile.txt").write_text(profile(root, tmp / "prof"))
    (out / "train-wall-probe.json").write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
