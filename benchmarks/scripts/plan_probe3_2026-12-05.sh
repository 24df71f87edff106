#!/usr/bin/env bash
# Issue 25, 2026-12-05 (second session), call 3 of plan --probe-host (about 3 minutes, one GPU; the session's last
# device time): plan --calibrate and NEW_HELD_OUT_6 with the probes (its training rows, as the time allows), on whatever host comes.
#   OUT=$OUT bash benchmarks/scripts/plan_probe3_2026-12-05.sh
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error
mkdir -p "$OUT" /tmp/set6c
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version,clocks.max.sm --format=csv; nproc;
  grep -m1 "model name" /proc/cpuinfo; } > "$OUT/host.txt"
(while true; do sleep 10; tar -czf "$OUT/runs.tgz" -C /tmp set6c 2>/dev/null; done) &
saver=$!
timeout 170 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set6c --set 6 --probe --budget-s 125 \
  2>&1 | grep -v Warning | tail -20
kill $saver
tar -czf "$OUT/runs.tgz" -C /tmp set6c
