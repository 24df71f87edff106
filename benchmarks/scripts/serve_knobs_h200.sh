#!/bin/bash
# Issue 27: the model process's knobs A/B on one H200 host (GPUKIT_X, read by the serve code while they are measured),
# ResNet-50 224 px, --engine compile --max-batch 128, 256 clients, `gpukit loadtest` 8 s (serve_profile.py --no-spy;
# the checkpoint and its engine cache kept between runs, so only the first start compiles). Each run's JSON joins
# $OUT/r.tgz as it ends; a run whose name ends in "spy" is sampled by py-spy (the model process with native frames).
#   WHEELS=/path/to/wheels OUT=/tmp/out RUNS="base prio ..." bash benchmarks/scripts/serve_knobs_h200.sh
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
mkdir -p /tmp/o
{ date; nvidia-smi --query-gpu=name,serial,driver_version --format=csv; nproc; } > /tmp/o/host.txt
export GPUKIT_SERVE_ENGINE=${ENGINE:-compile} SERVE_READY_S=300
i=0
for run in $RUNS; do
  i=$((i+1)); x=${run#*:}; name=${run%%:*}; [ "$x" = base ] && x=
  echo "== $i $name GPUKIT_X=$x $(date +%T)"
  spy=--no-spy; case $name in *spy) spy=--native;; esac  # a name ending in "spy": py-spy samples, native frames
  GPUKIT_X=$x timeout 200 python3 benchmarks/scripts/serve_profile.py --out /tmp/r/$i-$name --only "${CONFIG:-resnet/nvjpeg}" \
    --duration 8 --window 3 $spy --keep-work ${SERVE_ARGS:+--serve-args "$SERVE_ARGS"} 2>&1 | tail -2
  cp /tmp/r/$i-$name/profile.json /tmp/o/$i-$name.json 2>/dev/null
  [ $spy = --native ] && (cd /tmp/r/$i-$name && tar -czf /tmp/o/$i-$name-spy.tgz .)
  (cd /tmp && tar -czf $OUT/r.tgz o)  # after every run: what a cut-off call has done still comes back
done
date >> /tmp/o/host.txt; (cd /tmp && tar -czf $OUT/r.tgz o)
