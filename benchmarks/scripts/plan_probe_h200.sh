#!/usr/bin/env bash
# Issue 25: the first H200 run of plan --probe-host (one device call, under 10 minutes, one GPU). Not yet run.
#   OUT=$OUT bash benchmarks/scripts/plan_probe_h200.sh
# 1. plan --calibrate and NEW_HELD_OUT_7 (clean: chosen on 2026-12-05 before any of it ran), each configuration with
#    the probe just before and just after it is measured → $OUT/runs.tgz (set7/);
# 2. NEW_HELD_OUT_6 (three H100 hosts measured it on 2026-12-05) with the same calibration, as time allows (set6/).
# Then: plan_probe_summary.py on both, plan_error_table.py RUN --no-fit for memory and generate().
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error
mkdir -p "$OUT" /tmp/set7 /tmp/set6
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version,clocks.max.sm --format=csv; nproc;
  grep -m1 "model name" /proc/cpuinfo; } > "$OUT/host.txt"
(while true; do sleep 15; tar -czf "$OUT/runs.tgz" -C /tmp set7 set6 2>/dev/null; done) &
saver=$!
t0=$SECONDS
timeout 400 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set7 --set 7 --probe --budget-s 330 2>&1 \
  | grep -v Warning | tail -18
left=$((550 - (SECONDS - t0)))
if [ -f /tmp/set7/calibration.json ] && [ "$left" -gt 60 ]; then
  cp /tmp/set7/calibration.json /tmp/set6/
  timeout "$left" python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set6 --set 6 --probe --skip-calibration \
    --budget-s $((left - 45)) 2>&1 | grep -v Warning | tail -18
fi
kill $saver
tar -czf "$OUT/runs.tgz" -C /tmp set7 set6
echo "total $((SECONDS - t0)) s"
