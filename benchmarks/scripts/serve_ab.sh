#!/bin/bash
# ResNet-50 over HTTP (serve_h200.py --only resnet/gpukit-nvjpeg, 256 clients, gpukit loadtest and wrk), this tree
# against another revision's, in turns on one host, so that the two differ by the code only.
#   here:   git archive REV src benchmarks | (mkdir -p .ab/old && tar -x -C .ab/old)   (.ab/ is git-ignored)
#   device: WHEELS=.whl OUT=$OUT bash benchmarks/scripts/serve_ab.sh     (carry .whl, .deb, .ab)
# ORDER (default "new old new old"); ENGINE (default compile); BUDGET_S: no round starts after it (default 330).
# A round "cold" runs this tree after deleting the engine's caches (inductor's beside the checkpoint, Triton's), so
# its server compiles from nothing, as on a fresh machine. A py-spy wheel in .prof/ (carry it) samples the model
# process during each point (serve_h200.py's SERVE_PYSPY).
# The GPU-alone figure is measured in the first round only (SERVE_SKIP_ALONE), the engine cache is shared.
set -u
START=$(date +%s)
R=$OUT/r
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
for f in .deb/*.deb; do dpkg -x "$f" .deb; done
export LD_LIBRARY_PATH=$PWD/.deb/usr/lib/x86_64-linux-gnu
if [[ " ${ORDER:-old} " == *" old "* ]]; then
  [ -d .ab/old/src ] || { echo "no .ab/old/src: see the header"; exit 2; }
  ln -sfn "$PWD/.deb" .ab/old/.deb  # the old tree's serve_h200.py finds wrk beside itself
fi
timeout 60 python3 benchmarks/scripts/host_wakeup_probe.py --out $R/host-wakeup.json | tr -d '\n ' | head -c 300; echo
export SERVE_KEEP_WORK=1 GPUKIT_SERVE_ENGINE=${ENGINE:-compile} SERVE_READY_S=300
if ls .prof/py_spy-*.whl >/dev/null 2>&1; then
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall('/tmp/pyspy')" .prof/py_spy-*.whl
  export SERVE_PYSPY=$(find /tmp/pyspy -name py-spy -type f | head -1); chmod +x "$SERVE_PYSPY"
fi
i=0
for tree in ${ORDER:-new old new old}; do
  i=$((i + 1))
  [ $i -gt 1 ] && export SERVE_SKIP_ALONE=1
  [ $i -gt 1 ] && [ $(($(date +%s) - START)) -gt "${BUDGET_S:-330}" ] && break
  root=$PWD; [ "$tree" = old ] && root=$PWD/.ab/old
  [ "$tree" = cold ] && rm -rf /tmp/serve_h200_work/resnet50/.gpukit-engine ~/.triton/cache /tmp/torchinductor_*
  echo "== $i $tree $(date +%T)"
  PYTHONPATH=/tmp/site:$root/src timeout 200 python3 "$root/benchmarks/scripts/serve_h200.py" --out "$R/$i-$tree" \
    --only resnet/gpukit-nvjpeg 2>&1 | grep -E "alone|c=256" | cut -c1-200
  python3 - "$R/$i-$tree/serve_h200_only.json" "$tree" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["runs"]["resnet/gpukit-nvjpeg"]["points"][0]
t, w = p["server_timing_mean_ms"], d.get("wrk resnet/gpukit-nvjpeg") or {}
print(sys.argv[2], "req/s", p["throughput_rps"], "p99", round(p["latency_ms"]["p99"], 1), "wrk", w.get("rps"),
      w.get("p99_ms"), "batch", round(p["mean_batch"], 1), {k: round(t[k], 2) for k in ("prep", "infer", "queue")})
PY
  rm -f "$R/$i-$tree"/*.png
done
