#!/usr/bin/env bash
# The last H200 call of 2026-12-01: re-measures, on the final code, what the earlier calls of the day found short,
# each step under its own time limit so that a slow step cannot cost the others (one lease, ~5 minutes in all):
#   1. gpukit serve, ResNet-50 with nvJPEG at 256 clients, and the GPU-alone figure (the two-stage model pipeline);
#   2. plan --measure of the optimizer implementations and image sizes (the tied-embedding backward term);
#   3. gpukit train, the 4-epoch 20,480-image run with its wall-time split, and batch 32/256 throughput;
#   4. the train recipe's ResNet-18 rows on the packaged data sets and the generated mirror-symmetric one.
# Needs .whl (fastapi … numpy 2.4.6) carried and installed on PYTHONPATH first; writes one tarball under $OUT.
set -u
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT}"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=/tmp/followup; rm -rf "$W"; mkdir -p "$W"/{serve,plan,train,recipe}
T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
say serve; OUT=$W/serve timeout 100 bash benchmarks/scripts/serve_h200.sh --only resnet/gpukit-nvjpeg --duration 5 \
  > "$W/serve/log.txt" 2>&1; say "serve rc=$?"
say plan; timeout 80 python3 benchmarks/scripts/plan_knobs_h200.py --out "$W/plan" > "$W/plan/log.txt" 2>&1; say "plan rc=$?"
say train; OUT=$W/train timeout 75 python3 benchmarks/scripts/train_h200.py > "$W/train/log.txt" 2>&1; say "train rc=$?"
say recipe; timeout 80 python3 benchmarks/scripts/train_recipe.py --device cuda --hardware h200 --jobs 12 --workers 1 \
  --out "$W/recipe" --rows resnet18:digits-5 resnet18:lfw-faces resnet18:generated-stripes:default \
  resnet18:generated-stripes:--hflip > "$W/recipe/log.txt" 2>&1; say "recipe rc=$?"
tar czf "$OUT/followup.tgz" -C "$W" .
