#!/bin/bash
# Issue 27, 2026-12-06: host threads decoding part of each nvJPEG batch (--host-decode-threads), on one GPU machine.
# PARTS (default "tests resnet seed off"), in this order:
#   tests  the GPU serve tests (the split against nvJPEG alone and libjpeg-turbo);
#   resnet the headline's ResNet-50 part (serve_headline_compile_h200.sh: --engine compile beside LitServe, wrk
#          beside gpukit loadtest), host threads on their default;
#   on     the gpukit server of "resnet" alone, without LitServe (for a short lease);
#   seed   the headline's seed CNN part (its JPEGs are decoded in the HTTP workers: the host threads play no part);
#   off    ResNet-50's gpukit server again with --host-decode-threads 0, on the same host (the compiled engine
#          from its cache), last, so that a call cut short keeps the rest.
# The split was dropped (benchmarks/serve-host-decode_h100_2026-12-06.md); it lives in serve_host_decode.patch:
#   git apply benchmarks/scripts/serve_host_decode.patch
#   WHEELS=.whl OUT=$OUT bash benchmarks/scripts/serve_host_decode_h200.sh      (carry .whl and .deb)
set -u
cd "$(dirname "$0")/../.."
grep -q host-decode-threads src/gpukit/cli/serve.py || { echo "apply benchmarks/scripts/serve_host_decode.patch first" >&2; exit 2; }
R=/tmp/r
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
save() { (cd /tmp && tar -czf "$OUT/r.tgz" r); }
PARTS=${PARTS:-tests resnet seed off}
part() { [[ " $PARTS " == *" $1 "* ]]; }
if part tests; then
  echo "== gpu tests $(date +%T)"
  timeout 100 python3 -m pytest -q tests/gpu/test_serve_gpu.py -k "host_threads or batch_decoded" \
    -p no:cacheprovider > $R/gpu-tests.log 2>&1
  tail -3 $R/gpu-tests.log; save
fi
part resnet && PARTS="resnet" bash benchmarks/scripts/serve_headline_compile_h200.sh
if part on; then  # the gpukit server of "resnet" alone (no LitServe): a short lease's A/B with "off"
  echo "== resnet compile, host threads on their default $(date +%T)"
  GPUKIT_SERVE_ENGINE=compile SERVE_READY_S=200 timeout 200 python3 benchmarks/scripts/serve_h200.py \
    --out $R/res-on --only resnet/gpukit-nvjpeg 2>&1 | grep -v "^ *$" | tail -6; save
fi
if part seed; then
  [ -d /tmp/serve_h200_work ] && mv /tmp/serve_h200_work /tmp/resnet_work  # the seed part's run clears it
  PARTS="seed" bash benchmarks/scripts/serve_headline_compile_h200.sh
  rm -rf /tmp/serve_h200_work && [ -d /tmp/resnet_work ] && mv /tmp/resnet_work /tmp/serve_h200_work
fi
if part off; then
  echo "== resnet compile, --host-decode-threads 0 $(date +%T)"
  SERVE_KEEP_WORK=1 GPUKIT_SERVE_EXTRA="--host-decode-threads 0" GPUKIT_SERVE_ENGINE=compile SERVE_READY_S=150 \
    timeout 150 python3 benchmarks/scripts/serve_h200.py --out $R/res-h0 --only resnet/gpukit-nvjpeg 2>&1 \
    | grep -v "^ *$" | tail -6
fi
date >> $R/host.txt; save
