#!/bin/bash
# Issue 27, before/after on one H200 host, alternating: the gpukit source at BEFORE_SRC (a `git archive <commit> src`
# unpacked) against this tree, under `gpukit loadtest` (serve_profile.py --no-spy: 8 s measured, thread CPU only);
# then the GPU serve tests and ResNet-50 with --engine compile on this tree. Results tarred to $OUT/r.tgz.
#   BEFORE_SRC=/path/to/old/src WHEELS=/path/to/wheels OUT=/tmp/out bash benchmarks/scripts/serve_pipe_ab_h200.sh
# WHEELS: the serving wheels the GPU machine lacks (docs/serve.md lists them); installed into /tmp/site.
set -u
cd "$(dirname "$0")/../.."
R=/tmp/r
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
run() { # name config old|new
  local a=(--out "$R/$1" --only "$2" --duration 8 --window 3 --no-spy)
  [ "$3" = old ] && a+=(--src "$BEFORE_SRC")
  echo "== $1 $(date +%T)"; timeout 150 python3 benchmarks/scripts/serve_profile.py "${a[@]}" 2>&1 | tail -3
}
for i in 1 2; do
  run seed-old-$i seed/nvjpeg old; run seed-new-$i seed/nvjpeg new
  run seedpil-old-$i seed/pil old; run seedpil-new-$i seed/pil new
  run res-old-$i resnet/nvjpeg old; run res-new-$i resnet/nvjpeg new
done
echo "== gpu tests $(date +%T)"
timeout 200 python3 -m pytest -q -x tests/gpu/test_serve_gpu.py tests/gpu/test_serve_engine_gpu.py -p no:cacheprovider > $R/gpu-tests.log 2>&1; tail -3 $R/gpu-tests.log
echo "== compile $(date +%T)"
GPUKIT_SERVE_ENGINE=compile SERVE_READY_S=300 run res-new-compile resnet/nvjpeg new
date >> $R/host.txt
cd /tmp && tar -czf "$OUT/r.tgz" r
