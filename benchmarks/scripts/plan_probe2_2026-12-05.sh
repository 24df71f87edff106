#!/usr/bin/env bash
# Issue 25, 2026-12-05 (second session), call 2 of plan --probe-host (under 10 minutes, one GPU):
#   OUT=$OUT bash benchmarks/scripts/plan_probe2_2026-12-05.sh
# 1. plan --calibrate and NEW_HELD_OUT_6 from its eighth row (call 1 lost the rest to a row past GPT-2-medium's
#    positions), each configuration with the probe before (its own head size, and 16 as in call 1) and after;
# 2. NEW_HELD_OUT_5 with the same calibration and probes, as time allows.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error
mkdir -p "$OUT" /tmp/set6b /tmp/set5
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version,clocks.max.sm --format=csv; nproc;
  grep -m1 "model name" /proc/cpuinfo; } > "$OUT/host.txt"
(while true; do sleep 15; tar -czf "$OUT/runs.tgz" -C /tmp set6b set5 2>/dev/null; done) &
saver=$!
t0=$SECONDS
timeout 420 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set6b --set 6 --first 7 --probe --budget-s 350 \
  2>&1 | grep -v Warning | tail -14
left=$((550 - (SECONDS - t0)))
if [ -f /tmp/set6b/calibration.json ] && [ "$left" -gt 60 ]; then
  cp /tmp/set6b/calibration.json /tmp/set5/
  timeout "$left" python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set5 --set 5 --probe --skip-calibration \
    --budget-s $((left - 45)) 2>&1 | grep -v Warning | tail -18
fi
kill $saver
tar -czf "$OUT/runs.tgz" -C /tmp set6b set5
echo "total $((SECONDS - t0)) s"
