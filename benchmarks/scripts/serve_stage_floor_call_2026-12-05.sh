#!/bin/bash
# Issue 27, 2026-12-05 (session 48), device call 2: the seed CNN's stages alone and beside busy threads
# (serve_stage_floor.py), then the model process alone under serve_model_cpu.py with a 2.5 ms client pause: batch
# wait 2 ms, 0.5 ms, and 2 ms with the gap rule (--gap-ms, dropped: run on commit 9d1fe22, which has it).
#   WHEELS=.whl OUT=$OUT bash benchmarks/scripts/serve_stage_floor_call_2026-12-05.sh
set -u
R=$OUT
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
echo "== floor $(date +%T)"
timeout 240 python3 benchmarks/scripts/serve_stage_floor.py --json $R/floor.json --profile $R/floor-ops.txt 2>&1 | grep -v Warning | tail -16
for v in "w2 --max-wait-ms 2" "w05 --max-wait-ms 0.5" "g02 --max-wait-ms 2 --gap-ms 0.2"; do
  set -- $v; label=$1; shift
  echo "== $label $(date +%T)"
  timeout 120 python3 benchmarks/scripts/serve_model_cpu.py --model seed-cnn --device cuda --workers 8 --outstanding 8 --think-ms 2.5 --repeats 2 --label $label --json $R/think-$label.json "$@" 2>&1 | grep -v Warning | tail -2
done
date >> $R/host.txt
