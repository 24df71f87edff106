#!/usr/bin/env bash
# `gpukit train` on one H200: throughput (batch 32, 256) vs 2026-11-30, the 4-epoch run's wall-time split, and
# validation vs predict; then the train GPU tests (the scheduled CUDA-graph step). About 3-4 minutes; results in
# $OUT: train-h200.md, train-h200.json, train-h200.log, train-gpu-tests.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=benchmarks/out}"
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
# The H200 image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without .pyc files, so every process compiled
# torch's Python anew: `import torch` 4.8-6.1 s there, 2.1-2.4 s with bytecode (benchmarks/scripts/pycache_probe.sh).
# A pip install writes the bytecode; give the run the same, in a cache beside the read-as-is packages.
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && [ -z "${PYTHONPYCACHEPREFIX:-}" ]; then
  export PYTHONPYCACHEPREFIX=/tmp/gpukit-pycache
  site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  python3 -m compileall -q -j 0 "$site" src >/dev/null 2>&1 || true
fi
timeout 300 python3 benchmarks/scripts/train_h200.py 2>&1 | tee "$OUT/train-h200.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_train_gpu.py 2>&1 | tail -40 | tee "$OUT/train-gpu-tests.log"
