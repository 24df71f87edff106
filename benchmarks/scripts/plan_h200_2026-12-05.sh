#!/usr/bin/env bash
# Issue 25's next device calls, written 2026-12-05 with no device at hand (two calls of under 10 minutes, one H200):
#   PARTS=probe OUT=$OUT bash benchmarks/scripts/plan_h200_2026-12-05.sh   # 1 and 3, about 4 minutes
#   PARTS=grid OUT=$OUT bash benchmarks/scripts/plan_h200_2026-12-05.sh    # 2, about 6 minutes
# 1. plan_host_probe.py on CUDA, then its CPU half on the same host (does the CPU probe equal the CUDA host floor?
#    does a tiny model's per-layer cost carry to real widths? does the SDPA backend matter?);
# 2. plan --calibrate with the new generate() host line, then NEW_HELD_OUT_4 (17 configurations never measured),
#    each with the committed model's prediction written before it runs;
# 3. the same calibration's llama line beside the shipped one's, from plan_host_line_noise.py (3 runs).
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,serial,driver_version --format=csv; nproc; git log -1 --format=%h 2>/dev/null; } > "$OUT/host.txt"
PARTS=${PARTS:-probe grid}
if [[ " $PARTS " == *" probe "* ]]; then
  timeout 300 python3 benchmarks/scripts/plan_host_probe.py --device cuda --out "$OUT/probe_cuda.json" > "$OUT/probe.log" 2>&1
  echo "probe cuda rc=$?"
  timeout 120 python3 benchmarks/scripts/plan_host_probe.py --device cpu --out "$OUT/probe_cpu.json" >> "$OUT/probe.log" 2>&1
  echo "probe cpu rc=$?"
  timeout 90 python3 benchmarks/scripts/plan_host_line_noise.py --device cuda --runs 3 --json "$OUT/line_noise.json" 2>&1 | tail -4
fi
if [[ " $PARTS " == *" grid "* ]]; then
  timeout 540 python3 benchmarks/scripts/plan_error_grid.py --out /tmp/new4 --only-new-4 --budget-s 420 2>&1 | tail -20
  tar -czf "$OUT/new4.tgz" -C /tmp new4
fi
