#!/usr/bin/env bash
# One device call (stop 47): issue 27's host-share probe again with the model process's GIL switch interval
# (0,4,0,4 host threads), then issue 25's NEW_HELD_OUT_7 with plan --probe-host (calibrate first).
#   OUT=$OUT bash benchmarks/scripts/device_call_2026-12-05_s47.sh   (carry .whl: simplejpeg)
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/simplejpeg-*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version --format=csv,noheader; nproc;
  grep -m1 "model name" /proc/cpuinfo; } > "$OUT/host.txt"
timeout 150 python3 benchmarks/scripts/serve_host_share_probe.py --threads 0,4,0,4 --seconds 4 2>&1 | tail -6
mkdir -p /tmp/set7
(while true; do sleep 15; tar -czf "$OUT/runs.tgz" -C /tmp set7 2>/dev/null; done) &
saver=$!
timeout 370 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/set7 --set 7 --probe --budget-s 310 2>&1 \
  | grep -v Warning | tail -18
kill $saver
tar -czf "$OUT/runs.tgz" -C /tmp set7
