#!/bin/bash
# Issue 27: this tree against an older one, alternating on one host with `serve_profile.py --no-spy` (the seed CNN
# three pairs, ResNet-50 eager one pair), then the GPU serving tests and the seed CNN's stage floor on this tree.
# The older tree's src/ goes in .ab/before (git-ignored: carry it):
#   rm -rf .ab && mkdir -p .ab/before && git archive <rev> src | tar -x -C .ab/before
#   WHEELS=.whl OUT=$OUT bash benchmarks/scripts/serve_onepass_ab_2026-12-05.sh
# 2026-12-05, call 3 (benchmarks/serve-onepass_h200_2026-12-05.md): <rev> d21ddba against the one-pass path.
# Then <rev> 0019e9e against PipeHub (benchmarks/serve-hub_h100_2026-12-05.md), and <rev> 73cea4b against float32
# rows to the pipe (benchmarks/serve-rows_2026-12-05.md).
# SEED_PAIRS (3) and RESNET_PAIRS (1): how many alternating pairs of each; EXTRAS=0 skips the tests and the floor.
set -u
cd "$(dirname "$0")/../.."
R=/tmp/ab
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
ONE_TIMEOUT_S=150
source benchmarks/scripts/device_profile.sh
export GPUKIT_SERVE_ENGINE=eager SERVE_READY_S=120
B="--src .ab/before/src"
one s0-warm --only seed/pil
for i in $(seq 1 "${SEED_PAIRS:-3}"); do
  one s$i-before --only seed/pil $B
  one s$i-after --only seed/pil
done
for i in $(seq 1 "${RESNET_PAIRS:-1}"); do
  one r$i-before --only resnet/nvjpeg $B
  one r$i-after --only resnet/nvjpeg
done
[ "${EXTRAS:-1}" = 0 ] && { date >> $R/host.txt; save; exit 0; }
echo "== gpu tests $(date +%T)"
timeout 150 python3 -m pytest -q tests/gpu/test_serve_gpu.py -p no:cacheprovider > $R/gpu-tests.log 2>&1; tail -3 $R/gpu-tests.log
echo "== floor $(date +%T)"
timeout 90 python3 benchmarks/scripts/serve_stage_floor.py --busy 0,2 --batches 17,33 --json $R/floor-after.json 2>&1 | grep "^busy"
date >> $R/host.txt; save
