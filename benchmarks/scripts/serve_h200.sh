#!/usr/bin/env bash
# gpukit serve beside LitServe 0.2.19 on one H200 (issue 10): one run, ≤ 9 minutes, results under $OUT.
#   OUT=/tmp/out bash benchmarks/scripts/serve_h200.sh
# Needs, on PYTHONPATH: fastapi, starlette, pydantic, uvicorn, httptools, uvloop, python-multipart, prometheus-client,
# litserve==0.2.19 and its dependencies (see docs/serve.md). wrk is used if .deb/usr/bin/wrk exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/serve_h200_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
timeout 560 python3 benchmarks/scripts/serve_h200.py --out "$OUT" "$@" 2>&1 | tee "$OUT/serve_h200.log"
