#!/usr/bin/env bash
# Issue 27, one device call: (1) the seed CNN's model process alone (real ModelRunner on CUDA, real Batcher and
# pipes, 8 spawned PipeClient workers, 8 requests in flight each), runner variants and a shorter GIL switch
# interval, in turn; (2) ResNet-50's model process with a share of the JPEGs decoded on host threads (that part ran
# on commit 26574ae, whose HostShare was dropped after it: benchmarks/serve-host-share_h100_2026-12-05.md).
#   OUT=$OUT bash benchmarks/scripts/serve_seed_variants_2026-12-05.sh
set -u
OUT=${OUT:?}
export PYTHONPATH=src:/tmp/site
nvidia-smi --query-gpu=name,serial,driver_version --format=csv,noheader > "$OUT/host.txt" 2>&1
nproc >> "$OUT/host.txt"; python3 -c "import torch, simplejpeg; print(torch.__version__, simplejpeg.__version__)" >> "$OUT/host.txt" 2>&1
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_serve_gpu.py 2>&1 | tail -4
run() {  # label, extra args
  local label=$1; shift
  timeout 120 python3 benchmarks/scripts/serve_model_cpu.py --model seed-cnn --device cuda --workers 8 \
    --outstanding 8 --repeats 2 --seconds 6 --label "$label" --json "$OUT/$label.json" "$@" 2>&1 | tail -3
}
run main1
run nosync --variant nosync
run pinnedout --variant pinned-out
run onethread --variant onethread
run switch0.2 --switch-ms 0.2
run main2
run profile --repeats 1 --profile "$OUT/seed-profile.txt"
