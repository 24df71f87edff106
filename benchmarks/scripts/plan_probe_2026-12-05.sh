#!/usr/bin/env bash
# Issue 25, 2026-12-05 (second session): one device call (under 10 minutes, one GPU).
#   OUT=$OUT bash benchmarks/scripts/plan_probe_2026-12-05.sh
# 1. plan_workspace_check.py: plan --measure's base after a GEMM (the cuBLAS workspace fix, first run on a GPU);
# 2. plan --calibrate (the training host line of 1, 4 and 8 layers) and NEW_HELD_OUT_6 (clean), each configuration
#    with plan --probe-host's probe just before and just after it is measured → $OUT/set6.tgz;
# 3. NEW_HELD_OUT_3 with the same calibration and probes, as time allows → set3.tgz.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error
mkdir -p "$OUT" /tmp/set6 /tmp/set3
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version,clocks.max.sm --format=csv; nproc;
  grep -m1 "model name" /proc/cpuinfo; } > "$OUT/host.txt"
(while true; do sleep 15; tar -czf "$OUT/runs.tgz" -C /tmp set6 set3 2>/dev/null; done) &
saver=$!
t0=$SECONDS
timeout 60 python3 benchmarks/scripts/plan_workspace_check.py > "$OUT/workspace.txt" 2>&1
timeout 400 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set6 --set 6 --probe --budget-s 330 2>&1 | tail -22
left=$((560 - (SECONDS - t0)))
if [ -f /tmp/set6/calibration.json ] && [ "$left" -gt 60 ]; then
  cp /tmp/set6/calibration.json /tmp/set3/
  timeout "$left" python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set3 --set 3 --probe --skip-calibration \
    --budget-s $((left - 45)) 2>&1 | tail -18
fi
kill $saver
tar -czf "$OUT/runs.tgz" -C /tmp set6 set3
echo "total $((SECONDS - t0)) s"
