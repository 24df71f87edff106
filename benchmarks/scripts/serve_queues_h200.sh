#!/usr/bin/env bash
# Issue 27, 2026-12-03: preparation beside the forward pass before/after 32 CUDA hardware queues and the staging
# stream's change (gpukit.serve.cuda_env, gpukit.serve.staging), then over HTTP. One device call, about 6 minutes
# (at most 7), results under $OUT:
#   OUT=/tmp/out bash benchmarks/scripts/serve_queues_h200.sh
# 1. $OUT/probe.log, $OUT/serve-queues-probe.json: benchmarks/scripts/serve_queues_probe.py (no HTTP), one child
#    process with CUDA_DEVICE_MAX_CONNECTIONS=8 and one with 32, each the staging stream before and after.
# 2. $OUT/serve/serve_h200_only.{json,md,png}, $OUT/serve/serve_h200.log: gpukit loadtest, then wrk, against
#    ResNet-50 (nvJPEG, --max-batch 128, bf16, 256 clients) as served now (32 queues), the seed CNN (nvJPEG, 64
#    clients), ResNet-50 with CUDA's default 8 queues, and ResNet-50 with --engine compile (skipped when the plan is
#    late: SERVE_BUDGET_S).
# Carried, unpacked here, never installed: the serve extra's wheels for this Python (3.12) in .carry/serve-whl/
# (fastapi, starlette, pydantic, pydantic-core, annotated-types, annotated-doc, typing-inspection,
# typing-extensions, anyio, idna, uvicorn, h11, click, httptools, uvloop, python-multipart, prometheus-client,
# orjson) and Debian's wrk with its libluajit-5.1-2 in .carry/serve-deb/. Without fastapi, step 2 is skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OUT="${OUT:-/tmp/serve_queues_out}"
mkdir -p "$OUT/serve"
unset CUDA_DEVICE_MAX_CONNECTIONS  # the probe's children and the servers set their own
PY=/tmp/gpukit-serve-py
mkdir -p "$PY" .deb
for w in .carry/serve-whl/*.whl; do if [ -e "$w" ]; then python3 -m zipfile -e "$w" "$PY"; fi; done
for d in .carry/serve-deb/*.deb; do if [ -e "$d" ]; then dpkg -x "$d" .deb; fi; done
export PYTHONPATH="$PWD/src:$PY${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$PWD/.deb/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader || true
  ls .deb/usr/bin/wrk 2>&1 || true; } > "$OUT/probe.log"
timeout 100 python3 benchmarks/scripts/serve_queues_probe.py --seconds 2 2>&1 | tee -a "$OUT/probe.log" \
  || echo "probe exit $?" >> "$OUT/probe.log"
if python3 -c "import fastapi, uvicorn, httptools, multipart, prometheus_client, orjson" 2>> "$OUT/probe.log"; then
  SERVE_BUDGET_S=140 SERVE_READY_S=170 timeout 310 python3 benchmarks/scripts/serve_h200.py --out "$OUT/serve" \
    --duration 8 --only resnet/gpukit-nvjpeg,seed/gpukit-nvjpeg,resnet/gpukit-nvjpeg-q8,resnet/gpukit-nvjpeg-compile \
    2>&1 | tee "$OUT/serve/serve_h200.log" || echo "serve exit $?" >> "$OUT/serve/serve_h200.log"
else
  echo "the serve extra is not on PYTHONPATH (.carry/serve-whl): HTTP part skipped" | tee -a "$OUT/probe.log"
fi
