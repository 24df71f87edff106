#!/usr/bin/env bash
# `gpukit train` on one H200: throughput (batch 32, 256) vs 2026-11-30, the 4-epoch run's wall-time split, and
# validation vs predict. About 3 minutes; results in $OUT (train-h200.md, train-h200.json, train-h200.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=benchmarks/out}"
mkdir -p "$OUT"
PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} timeout 420 python3 benchmarks/scripts/train_h200.py 2>&1 | tee "$OUT/train-h200.log"
