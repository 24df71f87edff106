#!/usr/bin/env bash
# Issue 27: the seed CNN's model process alone (real ModelRunner on CUDA, real Batcher and pipes, 8 spawned
# PipeClient workers, 8 requests in flight each), four runner variants and two GIL switch intervals, alternating.
#   OUT=$OUT bash benchmarks/scripts/serve_seed_variants_2026-12-05.sh
set -u
OUT=${OUT:?}
export PYTHONPATH=src
nvidia-smi --query-gpu=name,serial,driver_version --format=csv,noheader > "$OUT/host.txt" 2>&1
nproc >> "$OUT/host.txt"; python3 -c "import torch; print(torch.__version__)" >> "$OUT/host.txt"
run() {  # label, extra args
  local label=$1; shift
  timeout 120 python3 benchmarks/scripts/serve_model_cpu.py --model seed-cnn --device cuda --workers 8 \
    --outstanding 8 --repeats 2 --seconds 6 --label "$label" --json "$OUT/$label.json" "$@" 2>&1 | tail -3
}
for round in 1 2; do
  run "main$round"
  run "nosync$round" --variant nosync
  run "pinnedout$round" --variant pinned-out
  run "onethread$round" --variant onethread
  run "switch0.2-$round" --switch-ms 0.2
done
run profile --repeats 1 --profile "$OUT/seed-profile.txt"
