#!/usr/bin/env bash
# Issue 25, 2026-12-05: one device call (under 10 minutes, one GPU; it ran on an H100) for the training host line's new calibration.
#   OUT=$OUT bash benchmarks/scripts/plan_set5_2026-12-05.sh
# 1. plan --calibrate (the new training host line) and NEW_HELD_OUT_5 with the committed model → $OUT/new5.tgz;
# 2. a second calibration on the same machine → $OUT/cal_b.json (how far the host lines move between two runs);
# 3. NEW_HELD_OUT_4 (measured on an H100 earlier that day) with the first calibration, as time allows → new4.tgz.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/new5 /tmp/new4h
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version,clocks.max.sm --format=csv; nproc; } > "$OUT/host.txt"
(while true; do sleep 15; tar -czf "$OUT/new5.tgz" -C /tmp new5 new4h 2>/dev/null; done) &
saver=$!
t0=$SECONDS
timeout 330 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/new5 --set 5 --budget-s 260 2>&1 | tail -22
timeout 120 python3 -c "
import time
from pathlib import Path
from gpukit.plan.calibrate import run_calibration
from gpukit.plan.calibration import save_calibration
t = time.perf_counter()
save_calibration(run_calibration('cuda'), Path('$OUT/cal_b.json'))
print(f'second calibration: {time.perf_counter() - t:.0f} s')
" 2>&1 | tail -2
left=$((540 - (SECONDS - t0)))
if [ -f /tmp/new5/calibration.json ] && [ "$left" -gt 60 ]; then
  cp /tmp/new5/calibration.json /tmp/new4h/
  timeout "$left" python3 benchmarks/scripts/plan_error_grid.py --out /tmp/new4h --set 4 --skip-calibration \
    --budget-s $((left - 50)) 2>&1 | tail -18
fi
kill $saver
tar -czf "$OUT/new5.tgz" -C /tmp new5 new4h
