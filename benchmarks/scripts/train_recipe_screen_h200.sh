#!/usr/bin/env bash
# Issue 23: train_recipe_screen.py's runs on one H200 host, P at a time (each one process, one intra-op thread, the
# model on the GPU): JOBS is a file of JSON lines (one run each); results appended to $OUT/screen.jsonl, stderr
# of each run to $OUT/screen-err/. As it ran for benchmarks/train-recipe-screen_h200_2026-12-03.md:
#   OUT=$O P=14 bash benchmarks/scripts/train_recipe_screen_h200.sh jobs.jsonl
set -u
cd "$(dirname "$0")/../.."
JOBS=$1
: "${OUT:=/tmp/screen}" "${P:=14}" "${RUN_S:=300}"
mkdir -p "$OUT/screen-err"
export OUT RUN_S
one() {  # one JSON line → one result line
  local err
  err="$OUT/screen-err/$(echo "$1" | md5sum | cut -c1-10).err"
  timeout -s KILL "$RUN_S" python3 benchmarks/scripts/train_recipe_screen.py "$1" >>"$OUT/screen.jsonl" 2>"$err"
}
export -f one
tr '\n' '\0' <"$JOBS" | xargs -0 -P "$P" -I{} bash -c 'one "$1"' _ {}
