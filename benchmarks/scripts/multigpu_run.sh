#!/usr/bin/env bash
# Issues 15 and 16: the multi-GPU figures on a machine with 2, 4 or 8 H200s, in ONE command (about 6 minutes on 8):
#   OUT=/some/folder [NCCL_TESTS_ALL_REDUCE=/path/to/all_reduce_perf] bash benchmarks/scripts/multigpu_run.sh
# Runs gpukit only: info --json, doctor, bench allreduce 1 KiB → 1 GiB (fp32 and bf16, per call and captured), the
# other collectives (--quick), p2p (every pair), scaling resnet50 1 → N, and a 2-GPU plan of resnet50 (with the
# busbw just measured) beside the measured 2-rank DDP step. nccl-tests is NOT built or shipped here: if
# NCCL_TESTS_ALL_REDUCE names an all_reduce_perf binary built in the same lease, it runs once (-b 1K -e 1G -f 2
# -g N) and the summary sets gpukit's busbw beside it (`plan --measure` itself runs on one GPU only: see the summary).
# Writes under $OUT (6 files): info.json, doctor.txt, gpukit.json (every run's JSON), summary.md (tables),
# nccl_tests.txt (or a line saying it was not run), log.txt.
set -u
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 COLUMNS=160
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
N=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
W=$(mktemp -d); DB="$W/results.db"; LOG="$OUT/log.txt"; : > "$LOG"
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
gk() { local t=$1; shift; timeout "$t" python3 -m gpukit "$@"; }
stamp "GPUs: $N"

gk 120 info --json > "$OUT/info.json" 2>> "$LOG"; stamp "info rc=$?"
gk 120 doctor > "$OUT/doctor.txt" 2>&1; stamp "doctor rc=$?"

gk 180 bench allreduce --device cuda --ranks "$N" --dtype fp32 --dtype bf16 --timeout 90 --db "$DB" --json \
  --markdown "$W/allreduce.md" > "$W/allreduce.json" 2>> "$LOG"; stamp "allreduce rc=$?"
for op in allgather reducescatter broadcast alltoall; do
  gk 90 bench "$op" --device cuda --ranks "$N" --quick --timeout 60 --db "$DB" --json > "$W/$op.json" 2>> "$LOG"
  stamp "$op rc=$?"
done
gk 200 bench p2p --repeat "${P2P_REPEAT:-5}" --db "$DB" --json --markdown "$W/p2p.md" > "$W/p2p.json" 2>> "$LOG"
stamp "p2p rc=$?"
gk 240 bench scaling --device cuda --model resnet50 --max-gpus "$N" --quick --timeout 120 --db "$DB" --json \
  --markdown "$W/scaling.md" > "$W/scaling.json" 2>> "$LOG"; stamp "scaling rc=$?"
if [ "$N" -ge 2 ]; then  # batch 64 per GPU = bench scaling's default; busbw from the allreduce run just stored
  gk 60 plan resnet50 --gpus 2 --batch 64 --db "$DB" --json > "$W/plan2.json" 2>> "$LOG"; stamp "plan 2 GPUs rc=$?"
fi

if [ -n "${NCCL_TESTS_ALL_REDUCE:-}" ] && [ -x "$NCCL_TESTS_ALL_REDUCE" ]; then
  timeout 180 "$NCCL_TESTS_ALL_REDUCE" -b 1K -e 1G -f 2 -g "$N" > "$W/nccl_tests.txt" 2>&1
  stamp "nccl-tests all_reduce_perf rc=$?"
  cp "$W/nccl_tests.txt" "$OUT/nccl_tests.txt"
else
  echo "nccl-tests not run: set NCCL_TESTS_ALL_REDUCE to an all_reduce_perf binary built in this lease" \
    > "$OUT/nccl_tests.txt"
fi

python3 - "$W" "$OUT/gpukit.json" <<'PY'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
docs = {}
for p in sorted(w.glob("*.json")):
    try:
        docs[p.stem] = json.loads(p.read_text())
    except ValueError as exc:
        docs[p.stem] = {"error": str(exc)}
Path(sys.argv[2]).write_text(json.dumps(docs, indent=2) + "\n")
PY
{
  echo "# gpukit multi-GPU run on $N × $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) — $(date -u +%Y-%m-%d)"
  echo; echo "git $(git rev-parse --short HEAD 2>/dev/null || echo n/a); NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"; echo
  python3 benchmarks/scripts/multigpu_compare.py "$W"
  for f in allreduce p2p scaling; do [ -f "$W/$f.md" ] && { echo; sed 's/^# /## /' "$W/$f.md"; }; done
  echo; echo "Took $(( $(date +%s) - T0 )) s."
} > "$OUT/summary.md"
stamp "done"
