#!/usr/bin/env bash
# Issue 23: train_recipe_devdraw_run.sh DRAW SEED TAG [gpukit train args...]: the plain `gpukit train DRAW/data --seed SEED
# --device cpu` (two intra-op threads), then its best and last checkpoints scored with gpukit.train.predict on DRAW/held;
# one JSON line appended to $RESULTS (default /tmp/devdraw/results.jsonl): held-out accuracy, the smallest quarter of
# the objects (radius), per class, wall time. As it ran for benchmarks/train-recipe-steps_cpu_2026-12-02.md.
set -u
D=$1; S=$2; T=$3; shift 3
W=${WORK:-/tmp/devdraw}; R=$W/runs/$T-s$S; rm -rf $R; mkdir -p $W/runs
cd "$(dirname "$0")/../.." && export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
t0=$(date +%s)
OMP_NUM_THREADS=2 ${PYTHON:-python3} -m gpukit train $D/data --seed $S --device cpu --out $R --json "$@" > $R.train.json 2> $R.train.err
t1=$(date +%s)
${PYTHON:-python3} - "$R" "$D" "$T" "$S" $((t1 - t0)) <<'PY' >> "${RESULTS:-$W/results.jsonl}"
import sys, json, numpy as np
from pathlib import Path
sys.path.insert(0, "src")
from gpukit.train.predict import predict
R, D, T, S, wall = sys.argv[1:]
out = {"tag": T, "seed": int(S), "wall_s": int(wall)}
for which in ("best", "last"):
    ck = Path(R) / f"{which}.json"
    if not ck.exists(): continue
    rows, skipped = predict(ck, [Path(D) / "held"], device="cpu")
    ok = {r.path: Path(r.path).parent.name == r.label for r in rows}
    out[which] = round(sum(ok.values()) / len(ok), 4)
    if which == "best":
        r = np.load(Path(D) / "held_r.npy")  # file NNNNN.png is image NNNNN of the set: its radius by index
        q = np.quantile(r, 0.25)
        small = [hit for p, hit in ok.items() if r[int(Path(p).stem)] <= q]
        out["smallq"] = round(sum(small) / len(small), 3)
        for c in ("square", "triangle"):
            v = [ok[p] for p in ok if Path(p).parent.name == c]; out[c] = round(sum(v) / len(v), 3)
try:
    j = json.loads(Path(R + ".train.json").read_text()); out["summary"] = {k: j.get(k) for k in ("best_epoch", "generalised", "verdict") if k in j}
except Exception as e:
    out["summary"] = str(e)[:100]
print(json.dumps(out))
PY
tail -1 "${RESULTS:-$W/results.jsonl}"
