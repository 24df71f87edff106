#!/usr/bin/env bash
# Issue 24 on one GPU (written for the H200): noise-based stopping, throttle discards and the SAME/SLOWER comparison,
# measured. Parts, so each device call stays under 10 minutes (PART=all runs them in order; REPS=20 by default):
#
#   quick  REPS × `gpukit bench --quick --device cuda` (noise-stopped) + 3 × the same with --noise-target 0
#          (the fixed count of before), each wall-timed             ~ REPS × 36 s (H200 host, 2026-12-02)
#   big    REPS × `bench vector-add saxpy --size 1GiB:float32 --backend torch-cuda --backend cupy --device cuda
#          --no-ceilings`                                                                         ~ REPS × 20 s
#   gemm   REPS × `bench gemm --size 8192:bf16 --device cuda --no-ceilings`                        ~ REPS × 15 s
#   shift  REPS pairs of runs (GPUKIT_SHIFTED=0, then 1) of engine_shift_workload.py's SHIFT_ADD_2 and SHIFT_ADD_5
#          at 256 MiB, torch-cuda only: each pair one 2 % and one 5 % comparison                  ~ REPS × 2 × 8 s
#          (2026-12-02 they ran beside every backend's 1 GiB vector-add and SAXPY: 110 s a command)
#   wall   3 × plain `gpukit bench --quick` (CPU and GPU rows: the README's command, target <= 30 s), wall-timed
#          into walls.txt as "wall", then one more broken down by stage → $OUT/phases.json     ~ 4 × 64 s
#   report engine_rerun_report.py over the history → $OUT/engine_rerun.md and .json
#
#   OUT=/some/dir PART="quick wall report" bash benchmarks/scripts/engine_rerun_h200.sh   (PYTHON=python3.12 picks
#   the interpreter; BUDGET_S=560 stops starting commands GUARD_S (default 30) seconds before the budget ends, so the
#   report still runs inside one device call)
#
# Everything goes into one history, $OUT/engine.db (or $DB), so later parts and the report see the earlier ones: a
# part too long for one device call (quick: ~REPS × 30 s on an H200 host) can run as two calls with REPS=10 and the
# same DB (carry it back in between, or run both calls in one warm lease; FIXED=0 in the second call). The report
# pairs consecutive runs. The bench flags used here (--quick --device --db --json --noise-target --no-ceilings
# --size -w) are those of `gpukit bench` as of 2026-12-02; bench_quick_phases.py (beside this file) breaks one run
# down by stage: PYTHONPATH=src python benchmarks/scripts/bench_quick_phases.py OUT.json -- bench --quick --json
set -u
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
# The H200 image ships its packages without bytecode and sets PYTHONDONTWRITEBYTECODE=1: every process then compiled
# torch & co. from source, 5.9 s of a `bench --quick` (engine-quick_h200_2026-12-02-run2.md). A pip install writes
# the bytecode; give the runs the same, in a cache filled once (as train_h200.sh does).
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
  export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/gpukit-pycache}
  "${PYTHON:-python3}" -m compileall -q -j 0 $("${PYTHON:-python3}" -c "import sys; print(' '.join(p for p in sys.path if p.endswith('-packages')))") src >/dev/null 2>&1 || true
fi
PY=${PYTHON:-python3}
REPS=${REPS:-20}
PART=" ${PART:-all} "
BUDGET_S=${BUDGET_S:-0}  # 0: no budget
GUARD_S=${GUARD_S:-30}
END_S=$(($(date +%s) + BUDGET_S))
FIXED=${FIXED:-3}  # quick: the fixed-count runs after the reruns (FIXED=0 in the second of two REPS=10 calls)
DB=${DB:-$OUT/engine.db}
LOG="$OUT/log.txt"
WALLS="$OUT/walls.txt"
SHIFT=benchmarks/scripts/engine_shift_workload.py
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$LOG"; }
# gk TAG ARGS...: one `gpukit bench` run saved in $DB, wall-timed into $WALLS under TAG
gk() {
  local tag=$1; shift
  if ((BUDGET_S > 0 && $(date +%s) + GUARD_S > END_S)); then echo "$tag skipped: budget" >>"$WALLS"; return; fi
  local t0; t0=$(date +%s%N)
  timeout 300 "$PY" -m gpukit bench "$@" >"$OUT/last.json" 2>>"$LOG"
  local rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  echo "$tag $((ms / 1000)).$(printf %03d $((ms % 1000))) rc=$rc" >>"$WALLS"
}

nvidia-smi --query-gpu=name,serial,driver_version,clocks.applications.graphics,power.limit,persistence_mode \
  --format=csv >>"$LOG" 2>&1 || true
"$PY" -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)" >>"$LOG" 2>&1

if [[ $PART == " all " || $PART == *" quick "* ]]; then
  say "quick: $REPS noise-stopped reruns, then 3 with a fixed count"
  for i in $(seq 1 "$REPS"); do gk quick --quick --device cuda --db "$DB" --json; done
  for i in $(seq 1 "$FIXED"); do gk quick-fixed --quick --device cuda --noise-target 0 --db "$DB" --json; done
fi
if [[ $PART == " all " || $PART == *" big "* ]]; then  # no ceilings: reruns compare rows; the datasheet still judges them
  say "big: $REPS × 1 GiB vector add / SAXPY"
  for i in $(seq 1 "$REPS"); do
    gk big vector-add saxpy --size 1GiB:float32 --backend torch-cuda --backend cupy --device cuda --no-ceilings \
      --db "$DB" --json
  done
fi
if [[ $PART == " all " || $PART == *" gemm "* ]]; then
  say "gemm: $REPS × GEMM 8192 bf16"
  for i in $(seq 1 "$REPS"); do gk gemm gemm --size 8192:bf16 --device cuda --no-ceilings --db "$DB" --json; done
fi
if [[ $PART == " all " || $PART == *" shift "* ]]; then
  say "shift: $REPS pairs (unshifted, then 2 % and 5 % more work), beside 1 GiB vector add / SAXPY"
  for i in $(seq 1 "$REPS"); do
    if ((BUDGET_S > 0 && $(date +%s) + 2 * GUARD_S > END_S)); then break; fi  # whole pairs only
    for shifted in 0 1; do
      GPUKIT_SHIFTED=$shifted gk "shift-$shifted" -w "$SHIFT:SHIFT_ADD_2" -w "$SHIFT:SHIFT_ADD_5" \
        --size 256MiB:float32 --backend torch-cuda --device cuda --no-ceilings --db "$DB" --json
    done
  done
fi
if [[ $PART == " all " || $PART == *" wall "* ]]; then
  say "wall: 3 × bench --quick (every device), then one broken down by stage"
  for i in 1 2 3; do gk wall --quick --db "$OUT/wall.db" --json; done
  t0=$(date +%s%N)
  GPUKIT_T0_NS=$t0 timeout 300 "$PY" benchmarks/scripts/bench_quick_phases.py "$OUT/phases.json" -- \
    bench --quick --db "$OUT/wall.db" --json >"$OUT/last.json" 2>>"$LOG"
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  echo "wall-phases $((ms / 1000)).$(printf %03d $((ms % 1000))) rc=$rc" >>"$WALLS"
fi
if [[ $PART == " all " || $PART == *" report "* ]]; then
  say "report"
  "$PY" benchmarks/scripts/engine_rerun_report.py "$DB" "$WALLS" "$OUT/engine_rerun" >>"$LOG" 2>&1
  cat "$OUT/engine_rerun.md" 2>/dev/null
fi
