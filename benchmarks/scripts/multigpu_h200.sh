#!/usr/bin/env bash
# Issue 14 on ONE NVIDIA H200: what one GPU allows of the multi-GPU benches, end to end in about 3 minutes.
#   OUT=/some/folder bash benchmarks/scripts/multigpu_h200.sh
# - gpukit bench allreduce --ranks 1, 1 KiB → 1 GiB, fp32 and bf16: a single rank's per-call overhead, per call and
#   as a captured CUDA graph of the loop (nccl-tests' -G), every result checked exactly (busbw is 0 on one rank by
#   NCCL's definition: the time per call is the figure);
# - gpukit bench p2p: expected `unavailable: one GPU` with the reason;
# - gpukit bench scaling N = 1 for resnet18 and resnet50 (DDP machinery off on one rank; the trainer's own step).
# Writes under $OUT (6 files): multigpu_h200.md (every table, versions, commands), allreduce.json, p2p.json,
# scaling.json (both models), report_allreduce.html (busbw/time plot), log.txt.
set -u
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 COLUMNS=160
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
DB=$(mktemp -d)/results.db
W=$(mktemp -d)
LOG="$OUT/log.txt"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
g() { python3 -m gpukit "$@"; }

stamp "versions"
{
  echo "# gpukit multi-GPU benches on one NVIDIA H200 — $(date -u +%Y-%m-%d)"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
  python3 -c 'import torch, sys; print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda, "| NCCL", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
  echo "git $(git rev-parse --short HEAD 2>/dev/null || echo n/a) | NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  echo '```'
} > "$W/head.md"

stamp "bench allreduce --ranks 1 (per call and captured)"
timeout 150 python3 -m gpukit bench allreduce --device cuda --ranks 1 --dtype fp32 --dtype bf16 --timeout 60 \
  --db "$DB" --json --markdown "$W/allreduce.md" > "$OUT/allreduce.json" 2>> "$LOG"
stamp "allreduce rc=$?"

stamp "bench p2p (one GPU: unavailable expected)"
timeout 60 python3 -m gpukit bench p2p --db "$DB" --json --markdown "$W/p2p.md" > "$OUT/p2p.json" 2>> "$LOG"
stamp "p2p rc=$?"

for m in resnet18 resnet50; do
  stamp "bench scaling --model $m --max-gpus 1"
  timeout 120 python3 -m gpukit bench scaling --device cuda --model "$m" --max-gpus 1 --timeout 90 --db "$DB" --json \
    --markdown "$W/scaling_$m.md" > "$W/scaling_$m.json" 2>> "$LOG"
  stamp "scaling $m rc=$?"
done
python3 - "$W" "$OUT/scaling.json" <<'PY'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
docs = {}
for m in ("resnet18", "resnet50"):
    try:
        docs[m] = json.loads((w / f"scaling_{m}.json").read_text())
    except (OSError, ValueError) as exc:
        docs[m] = {"error": str(exc)}
Path(sys.argv[2]).write_text(json.dumps(docs, indent=2) + "\n")
PY

stamp "report of the allreduce run"
RID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$OUT/allreduce.json" 2>/dev/null)
[ -n "$RID" ] && g report --run "$RID" --db "$DB" -o "$OUT/report_allreduce.html" >> "$LOG" 2>&1
stamp "report rc=$?"

{
  cat "$W/head.md"; echo
  for f in allreduce p2p scaling_resnet18 scaling_resnet50; do
    [ -f "$W/$f.md" ] && { sed 's/^# /## /' "$W/$f.md"; echo; }
  done
  echo "Took $(( $(date +%s) - T0 )) s. JSON beside this file; the log in log.txt."
} > "$OUT/multigpu_h200.md"
stamp "done"
