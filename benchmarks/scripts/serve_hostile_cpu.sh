#!/usr/bin/env bash
# `gpukit serve` against hostile clients at the counts of issue 22, on this CPU machine (loopback only):
#   bash benchmarks/scripts/serve_hostile_cpu.sh [OUT.jsonl]
# Runs tests/integration/test_serve_hostile.py with GPUKIT_HOSTILE_SCALE=full (1,100 slow bodies + 2,000 slowloris
# connections at once, a 10 s WebP-bomb storm from 8 clients + one posting 256 bombs a request, two 100 MB headers,
# 20 uploads of 9 and 64 MB per client and key, SIGTERM beside 32 keep-alive clients, a 50 ms deadline under load,
# SIGKILL of the model process of a --workers 2 server, loadtest against nothing) and writes what each test measured,
# one JSON object a line. About 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-/tmp/serve-hostile.jsonl}"
rm -f "$OUT"
uptime
GPUKIT_HOSTILE_SCALE=full GPUKIT_HOSTILE_FIGURES="$OUT" PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" \
  python -m pytest -q -p no:cacheprovider tests/integration/test_serve_hostile.py
uptime
cat "$OUT"
