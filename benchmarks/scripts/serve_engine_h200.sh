#!/usr/bin/env bash
# Issue 27, what a later session measures on one H200, results under $OUT. PARTS picks what runs; each choice below
# fits one device call (< 10 minutes):
#   OUT=/tmp/out bash benchmarks/scripts/serve_engine_h200.sh                   # PARTS=engine (the default), ≤ 8 min
#   OUT=/tmp/out PARTS=http,serve bash benchmarks/scripts/serve_engine_h200.sh  # ≤ 9 min
# engine: --engine on the GPU alone (benchmarks/scripts/serve_engine_probe.py, $OUT/engine/engine.json): ResNet-50
#    224 px, trained briefly by `gpukit train` so the gate has the run's validation images; img/s at batch 64 and 256
#    in bf16 + channels_last for eager (launches from Python), eager + one CUDA graph, compile (max-autotune kernels)
#    + one CUDA graph, each size's compile time; then `--engine auto --amp bf16 --max-batch 64` through gpukit's own
#    builder: both engines warmed at every padded size, gated against fp32 eager, timed, one chosen. Then the GPU
#    tests of the engines (tests/gpu/test_serve_engine_gpu.py). TensorRT is not installed there: not measured.
# http: the HTTP worker's CPU per /v1/predict request, per stage, on the H200 host's CPU (the direct ASGI route of
#    gpukit.serve.route; benchmarks/scripts/serve_http_cpu.py, the model process an echo): $OUT/http_cpu_after.json.
#    If $BEFORE_SRC names a checkout of main before issue 27 (its src/ folder), the same on that code too.
# serve: ResNet-50 (nvJPEG, --max-batch 128, bf16) and the seed CNN over HTTP at their headline client counts, with
#    the GPU-alone figure in the same run and the wrk cross-check when .deb/usr/bin/wrk exists (serve_h200.sh --only);
#    the shutdown summary and /metrics of that run keep gpukit_queue_cancelled_total (should be 0: no client leaves).
# Not measured here: nvImageCodec decoding (not built).
# Needs on PYTHONPATH what serve_h200.sh needs (docs/serve.md), plus orjson 3.x (the serve extra pins it; without it
# the standard library's JSON encoder is used and the JSON stage is slower: say which one ran, the JSON records it).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/serve_engine_h200_out}"
mkdir -p "$OUT"
SRC="$PWD/src"
python3 -c "import orjson; print('orjson', orjson.__version__)" > "$OUT/orjson.txt" 2>&1 || echo "orjson: missing" > "$OUT/orjson.txt"
nproc > "$OUT/nproc.txt"
PARTS=",${PARTS:-engine},"
if [[ "$PARTS" == *,engine,* ]]; then
  mkdir -p "$OUT/engine"
  PYTHONPATH="$SRC${PYTHONPATH:+:$PYTHONPATH}" timeout "${PROBE_S:-420}" python3 benchmarks/scripts/serve_engine_probe.py ${PROBE_ARGS:-} \
    --out "$OUT/engine" 2>&1 | tee "$OUT/engine/probe.log" || echo "probe exit $?" >> "$OUT/engine/probe.log"
  PYTHONPATH="$SRC${PYTHONPATH:+:$PYTHONPATH}" timeout 60 python3 -m pytest -q tests/gpu/test_serve_engine_gpu.py \
    > "$OUT/engine/gpu_tests.log" 2>&1 || true
fi
if [[ "$PARTS" == *,http,* ]]; then
  PYTHONPATH="$SRC${PYTHONPATH:+:$PYTHONPATH}" timeout 120 python3 benchmarks/scripts/serve_http_cpu.py \
    --label after --requests 4000 --repeats 5 --json "$OUT/http_cpu_after.json" 2>&1 | tee "$OUT/http_cpu.log"
fi
if [[ "$PARTS" == *,http,* ]] && [ -n "${BEFORE_SRC:-}" ]; then
  PYTHONPATH="$BEFORE_SRC${PYTHONPATH:+:$PYTHONPATH}" timeout 120 python3 benchmarks/scripts/serve_http_cpu.py \
    --label before --requests 4000 --repeats 5 --json "$OUT/http_cpu_before.json" 2>&1 | tee -a "$OUT/http_cpu.log"
fi
if [[ "$PARTS" == *,serve,* ]]; then
  OUT="$OUT/serve" timeout "${SERVE_S:-330}" bash benchmarks/scripts/serve_h200.sh --only "${SERVE_ONLY:-resnet/gpukit-nvjpeg,seed/gpukit}" ${SERVE_ARGS:-}
fi
