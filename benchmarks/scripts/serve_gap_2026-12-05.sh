#!/bin/bash
# Issue 27, 2026-12-05 (session 48): the batcher's gap rule (`gpukit serve --max-gap-ms G`: a batch's wait ends once
# no request has come for G ms, as well as after --max-wait-ms) against the wait alone, alternating on one host,
# with `serve_profile.py --no-spy` (gpukit loadtest; thread CPU): the seed CNN (eager, 64 clients) and ResNet-50
# (eager, bf16, nvJPEG, max batch 128, 256 clients).
# The rule was dropped (benchmarks/serve-onepass_h200_2026-12-05.md): run this on commit 9d1fe22, which has it.
#   WHEELS=.whl OUT=$OUT bash benchmarks/scripts/serve_gap_2026-12-05.sh
set -u
cd "$(dirname "$0")/../.."
R=/tmp/g
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
source benchmarks/scripts/device_profile.sh
export GPUKIT_SERVE_ENGINE=eager SERVE_READY_S=150
for i in 1 2; do
  one s$i-none --only seed/pil
  one s$i-gap0.2 --only seed/pil --serve-args "--max-gap-ms 0.2"
  one s$i-gap0.5 --only seed/pil --serve-args "--max-gap-ms 0.5"
done
one s3-gap0.1 --only seed/pil --serve-args "--max-gap-ms 0.1"
one s3-none --only seed/pil
for i in 1 2; do
  one r$i-none --only resnet/nvjpeg
  one r$i-gap0.3 --only resnet/nvjpeg --serve-args "--max-gap-ms 0.3"
done
date >> $R/host.txt; save
