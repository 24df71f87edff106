#!/bin/bash
# Issue 27, 2026-12-05: two knobs measured on one H200 host, alternating, with `serve_profile.py --no-spy`:
# - ResNet-50 (--engine compile, bf16, max batch 128, 256 clients): JPEGs decoded in the HTTP workers (--decode pil,
#   libjpeg-turbo through simplejpeg on each worker's loop) against the model process's batched nvJPEG (the default);
# - the seed CNN (eager, 64 clients): --max-wait-ms 0.5 and 1 against the default 2.
#   WHEELS=.whl OUT=$OUT bash benchmarks/scripts/serve_knobs2_h200_2026-12-05.sh
set -u
cd "$(dirname "$0")/../.."
R=/tmp/k
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
ONE_TIMEOUT_S=240
source benchmarks/scripts/device_profile.sh
export GPUKIT_SERVE_ENGINE=compile SERVE_READY_S=220
one r1-nvjpeg --only resnet/nvjpeg
one r2-pil --only resnet/pil
one r3-pil-w12 --only resnet/pil --serve-args "--workers 12"
one r4-nvjpeg --only resnet/nvjpeg
one r5-pil --only resnet/pil
export GPUKIT_SERVE_ENGINE=eager
one s1-wait0.5 --only seed/pil --serve-args "--max-wait-ms 0.5"
one s2-wait2 --only seed/pil
one s3-wait1 --only seed/pil --serve-args "--max-wait-ms 1"
one s4-wait0.5 --only seed/pil --serve-args "--max-wait-ms 0.5"
date >> $R/host.txt; save
