#!/usr/bin/env bash
# Issue 27, what a later session measures on one H200 in one call (≤ 9 minutes), results under $OUT:
#   OUT=/tmp/out bash benchmarks/scripts/serve_engine_h200.sh
# 1. The HTTP worker's CPU per /v1/predict request, per stage, on the H200 host's CPU (the direct ASGI route of
#    gpukit.serve.route; benchmarks/scripts/serve_http_cpu.py, the model process an echo): $OUT/http_cpu_after.json.
#    If $BEFORE_SRC names a checkout of main before issue 27 (its src/ folder), the same on that code too.
# 2. ResNet-50 (nvJPEG, --max-batch 128, bf16) and the seed CNN over HTTP at their headline client counts, with the
#    GPU-alone figure in the same run and the wrk cross-check when .deb/usr/bin/wrk exists (serve_h200.sh --only).
# 3. The shutdown summary and /metrics of that run keep gpukit_queue_cancelled_total (should be 0: no client leaves).
# Not measured here: --engine compile/tensorrt (not built in this change), nvImageCodec decoding (not built).
# Needs on PYTHONPATH what serve_h200.sh needs (docs/serve.md), plus orjson 3.x (the serve extra pins it; without it
# the standard library's JSON encoder is used and the JSON stage is slower: say which one ran, the JSON records it).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/serve_engine_h200_out}"
mkdir -p "$OUT"
SRC="$PWD/src"
python3 -c "import orjson; print('orjson', orjson.__version__)" > "$OUT/orjson.txt" 2>&1 || echo "orjson: missing" > "$OUT/orjson.txt"
nproc > "$OUT/nproc.txt"
PYTHONPATH="$SRC${PYTHONPATH:+:$PYTHONPATH}" timeout 120 python3 benchmarks/scripts/serve_http_cpu.py \
  --label after --requests 4000 --repeats 5 --json "$OUT/http_cpu_after.json" 2>&1 | tee "$OUT/http_cpu.log"
if [ -n "${BEFORE_SRC:-}" ]; then
  PYTHONPATH="$BEFORE_SRC${PYTHONPATH:+:$PYTHONPATH}" timeout 120 python3 benchmarks/scripts/serve_http_cpu.py \
    --label before --requests 4000 --repeats 5 --json "$OUT/http_cpu_before.json" 2>&1 | tee -a "$OUT/http_cpu.log"
fi
OUT="$OUT/serve" timeout 330 bash benchmarks/scripts/serve_h200.sh --only resnet/gpukit-nvjpeg,seed/gpukit
