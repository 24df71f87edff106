#!/bin/bash
# Issue 27: the model process's knobs A/B on one H200 host (benchmarks/serve-knobs_h200_2026-12-04.md). GPUKIT_X
# names the knobs; only the tree they were measured on reads it: `git checkout a7a7ede && git apply
# benchmarks/scripts/serve_knobs_a7a7ede.patch` (prio, block, pin, recv, switch<seconds>; the kept ones are in main).
# ResNet-50 224 px, --engine compile --max-batch 128, 256 clients, `gpukit loadtest` 8 s (serve_profile.py --no-spy;
# the checkpoint and its engine cache kept between runs, so only the first start compiles). Each run's JSON joins
# $OUT/r.tgz as it ends; a run whose name ends in "spy" is sampled by py-spy (the model process with native frames).
#   WHEELS=/path/to/wheels OUT=/tmp/out RUNS="base:base prio:prio recv:recv,pin ..." bash benchmarks/scripts/serve_knobs_h200.sh
# (each run NAME:KNOBS, "base" for none)
set -u
cd "$(dirname "$0")/../.."
source benchmarks/scripts/device_site.sh /tmp/o/host.txt || exit 1
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
