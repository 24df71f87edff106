"""Issue 21 on one GPU (written for the H200): `gpukit accept` back to back, in one device call.

1. ``gpukit accept --json`` with its defaults (30 s soak, p2p and all-reduce): the wall time of a real acceptance.
2. ``gpukit accept --json --soak-s SOAK --no-node-checks`` again and again, up to RUNS times, while the next run still
   fits in BUDGET_S (each run predicted to take as long as the longest so far): the run-to-run spread of every figure.

Every run is its own process (the CLI, as an operator types it), on a fresh history (XDG_DATA_HOME in a temporary
folder). Writes into $OUT: runs.jsonl (each run's acceptance document plus ``_run``: label, exit code, wall time,
arguments), env.txt (nvidia-smi and versions before and after), log.txt (every run's stderr), summary.txt (the
table printed last).

    OUT=/some/dir python3 benchmarks/scripts/accept_h200.py     (BUDGET_S=280 RUNS=10 SOAK=10 EXTRA="--device cpu")
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ["OUT"])
BUDGET_S = float(os.environ.get("BUDGET_S", "280"))
RUNS = int(os.environ.get("RUNS", "10"))
SOAK = os.environ.get("SOAK", "10")
EXTRA = shlex.split(os.environ.get("EXTRA", ""))
T0 = time.time()


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.update(PYTHONUNBUFFERED="1", NCCL_NVLS_ENABLE="0", XDG_DATA_HOME=tempfile.mkdtemp(prefix="accept-xdg-"))
    return e


ENV = env()


def snapshot(label: str) -> None:
    query = "name,uuid,driver_version,power.limit,clocks.max.sm,clocks.sm,temperature.gpu"
    query += ",ecc.errors.uncorrected.volatile.total,persistence_mode"
    versions = "import sys, torch, numpy; print(sys.version.split()[0], torch.__version__, torch.version.cuda, "
    versions += "numpy.__version__)"
    lines = [f"== {label} at {time.time() - T0:.1f} s"]
    for cmd in (["nvidia-smi", f"--query-gpu={query}", "--format=csv"], [sys.executable, "-c", versions]):
        try:
            lines.append(subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=ENV).stdout.strip())
        except (OSError, subprocess.TimeoutExpired) as exc:
            lines.append(f"{cmd[0]}: {exc}")
    with open(OUT / "env.txt", "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def run(label: str, args: list[str]) -> float:
    cmd = [sys.executable, "-m", "gpukit", "accept", "--json", "--node", "h200-accept", *EXTRA, *args]
    t = time.time()
    with open(OUT / "log.txt", "a", encoding="utf-8") as log:
        log.write(f"== {label}: {shlex.join(cmd[1:])}\n")
        log.flush()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True, timeout=240, env=ENV, cwd=ROOT)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as exc:
            rc, out = 124, exc.stdout if isinstance(exc.stdout, str) else ""
    wall = time.time() - t
    try:
        doc = json.loads(out)
    except ValueError as exc:
        doc = {"error": f"no JSON on stdout ({exc}): {out[-500:]}"}
    doc["_run"] = {"label": label, "rc": rc, "wall_s": round(wall, 2), "args": shlex.join(cmd[3:])}
    with open(OUT / "runs.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(doc) + "\n")
    print(f"{label}: exit {rc}, {wall:.1f} s wall, verdict {doc.get('verdict')}", flush=True)
    return wall


def summary() -> str:
    docs = [json.loads(line) for line in (OUT / "runs.jsonl").read_text().splitlines()]
    spread_runs = [d for d in docs if d["_run"]["label"].startswith("spread") and d.get("gpus")]
    lines = [f"{d['_run']['label']}: exit {d['_run']['rc']} wall {d['_run']['wall_s']} s verdict {d.get('verdict')} "
             f"reasons {d.get('reasons')}" for d in docs]  # fmt: skip
    figures: dict[str, list[float]] = {}
    for d in spread_runs:
        for name, fig in d["gpus"][0]["figures"].items():
            if fig.get("status") == "ok":
                figures.setdefault(name, []).append(fig["value"])
    lines.append(f"{'figure':18} {'n':>2} {'min':>10} {'median':>10} {'max':>10} {'max/min-1':>9}")
    for name, vals in figures.items():
        vals.sort()
        lines.append(f"{name:18} {len(vals):2d} {vals[0]:10.1f} {vals[len(vals) // 2]:10.1f} {vals[-1]:10.1f} "
                     f"{vals[-1] / vals[0] - 1:9.2%}")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    snapshot("before")
    default = run("default", shlex.split(os.environ.get("DEFAULT_ARGS", "")))
    longest = 0.0
    for i in range(1, RUNS + 1):
        predicted = longest * 1.1 if longest else 0.7 * default  # the first spread run: 20 s less soak, no node checks
        if time.time() - T0 + predicted + 10 > BUDGET_S:
            print(f"stopping after {i - 1} spread run(s): the next would pass the {BUDGET_S:.0f} s budget", flush=True)
            break
        longest = max(longest, run(f"spread{i}", ["--soak-s", SOAK, "--no-node-checks"]))
    if BUDGET_S - (time.time() - T0) > 100:  # the GPU test too, when a minute and a half is left
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-m",
            "gpu",
            "-p",
            "no:cacheprovider",
            "tests/gpu/test_accept_gpu.py",
        ]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=150, env=ENV, cwd=ROOT)
            (OUT / "gpu_test.txt").write_text(p.stdout[-20000:] + p.stderr[-5000:] + f"\nexit {p.returncode}\n")
            print(f"tests/gpu/test_accept_gpu.py: exit {p.returncode}", flush=True)
        except subprocess.TimeoutExpired:
            (OUT / "gpu_test.txt").write_text("timed out after 150 s\n")
    snapshot("after")
    text = summary()
    (OUT / "summary.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
