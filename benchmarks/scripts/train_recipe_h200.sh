#!/usr/bin/env bash
# Issue 23, the default recipe's table on one H200 host (16 cores), in one call of about 8 minutes; results under
# $OUT (file names end in $SUFFIX, default -run5):
#  1. the default recipe alone on the GPU (one run at a time: seed 0 of two sets), then the recipe table: 9 sets ×
#     3 seeds × the recipes in $RECIPES (default, seed, previous), $JOBS (8) runs at a time on cores $TABLE_CORES (8-13; times shared: an upper bound of the
#     alone times), while
#     tests/gpu/test_train_gpu.py runs on cores 14-15;
#  2. meanwhile, the default recipe on an emulated 2-core CPU machine (taskset, CUDA_VISIBLE_DEVICES="", 2 threads):
#     lanes on cores 0-7, each the sets and seeds named in $CPU_LANES ("0,1:SET:SEED SET:SEED;2,3:…"), none given
#     the default;
#  3. seed-CNN throughput with augmentation off / default (train_throughput_aug.py), after the tables, alone.
# The packaged sets (digits, faces, textures) are built beforehand with scikit-learn/-image and carried in
# $RECIPE_DATA; the generated sets are built here (numpy + Pillow, seeded: the same images everywhere).
# Run 3 (2026-12-02) also ran --min-steps 2000 and --image-size 128 variants; see git history for that part.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=benchmarks/out}"
: "${RECIPE_DATA:=.wt/recipe-data}"
: "${SUFFIX:=-run5}"
FINAL=$OUT  # at most a few files come back from the device: everything is written under $OUT/r, then packed
OUT=$OUT/r
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ] && [ -z "${PYTHONPYCACHEPREFIX:-}" ]; then  # see train_h200.sh
  export PYTHONPYCACHEPREFIX=/tmp/gpukit-pycache
  site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  python3 -m compileall -q -j 0 "$site" src >/dev/null 2>&1 || true
fi
R=benchmarks/scripts/train_recipe.py
pin() {  # cores, command...: on those cores (without util-linux's taskset unpinned, and the log says so)
  local cores=$1; shift
  if command -v taskset >/dev/null; then taskset -c "$cores" "$@"; else echo "unpinned: $*" >>"$OUT/no-taskset.log"; "$@"; fi
}
date -u +"start %T" | tee "$OUT/timeline.log"
python3 $R --data-dir "$RECIPE_DATA" --build-only >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
date -u +"built %T" | tee -a "$OUT/timeline.log"
LANES_END=$((SECONDS + ${CPU_LANE_S:-480}))
lane() {  # cores, set:seed pairs...: one run at a time, none started that could not end by LANES_END
  local cores=$1 pair; shift
  for pair in "$@"; do
    [ $((LANES_END - SECONDS)) -ge "${CPU_RUN_S:-300}" ] || { echo "no time left for $pair" >>"$OUT/cpu-lanes.log"; continue; }
    timeout -s KILL "${CPU_RUN_S:-300}" python3 $R --data-dir "$RECIPE_DATA" --device cpu --cores "$cores" \
      --recipes default --seeds "${pair##*:}" --datasets "${pair%%:*}" --hardware cpu2-emulated \
      --suffix="$SUFFIX-${pair%%:*}-s${pair##*:}" --out "$OUT" >>"$OUT/cpu-lane-${cores/,/-}.log" 2>&1
  done
}
IFS=';' read -ra lanes <<<"${CPU_LANES:-}"
for spec in "${lanes[@]}"; do
  # shellcheck disable=SC2086  # the pairs are words
  lane "${spec%%:*}" ${spec#*:} &
done
pin 8-15 timeout "${ALONE_S:-40}" python3 $R --data-dir "$RECIPE_DATA" --device cuda --hardware h200 \
  --suffix="$SUFFIX-alone" --recipes default --seeds 0 --alone-seeds 0 --only-alone \
  --datasets ${ALONE_SETS:-lfw-faces shapes-small} --out "$OUT" >"$OUT/gpu-alone.log" 2>&1
date -u +"alone %T" | tee -a "$OUT/timeline.log"
pin 14,15 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_train_gpu.py \
  >"$OUT/gpu-tests.log" 2>&1 &
pin "${TABLE_CORES:-8-13}" timeout "${GPU_TABLE_S:-300}" python3 $R --data-dir "$RECIPE_DATA" --device cuda \
  --hardware h200 --suffix="$SUFFIX" --jobs "${JOBS:-8}" --out "$OUT" \
  --recipes ${RECIPES:-default seed previous} >"$OUT/gpu-table.log" 2>&1
date -u +"table %T" | tee -a "$OUT/timeline.log"
pin 8-15 timeout 40 python3 benchmarks/scripts/train_throughput_aug.py --recipes none default --out "$OUT" \
  >"$OUT/throughput.log" 2>&1
date -u +"throughput %T" | tee -a "$OUT/timeline.log"
wait
date -u +"end %T" | tee -a "$OUT/timeline.log"
tar -czf "$FINAL/train-recipe-results.tgz" -C "$OUT" .
for f in "$OUT"/train-recipe_h200_*"$SUFFIX".md "$OUT"/train-recipe_h200_*-alone.md "$OUT"/train-throughput-aug.md; do grep "^|" "$f" | grep -v -- "---"; done 2>/dev/null
tail -n 3 "$OUT"/gpu-tests.log "$OUT"/cpu-lane-*.log
