#!/usr/bin/env bash
# Issue 23, run 3 (the default small-cnn with two full-resolution convolutions, >= 1,200 steps), on one H200 host
# (16 cores), in one call of about 4 minutes; results under $OUT (file names end in -run3):
#  1. the default recipe alone on the GPU (one run at a time: seed 0 of three sets), then the recipe table: 9 sets ×
#     3 seeds × 3 recipes, 10 runs at a time on cores 4-13 (times shared: an upper bound of the alone times), while
#     tests/gpu/test_train_gpu.py runs on cores 14-15;
#  2. meanwhile, the default recipe on an emulated 2-core CPU machine (taskset, CUDA_VISIBLE_DEVICES="", 2 threads):
#     two lanes, cores 0,1 and 2,3, seed 0, each lane a share of the sets;
#  3. on the two sets the first small-cnn missed (triangles vs stars, 4-8 px objects): the default with the 2,000
#     steps the first small-cnn took (--min-steps 2000) and with --image-size 128, three seeds;
#  4. seed-CNN throughput with augmentation off / default (train_throughput_aug.py), after the tables, alone.
# The packaged sets (digits, faces, textures) are built beforehand with scikit-learn/-image and carried in
# $RECIPE_DATA; the generated sets are built here (numpy + Pillow, seeded: the same images everywhere).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:=benchmarks/out}"
: "${RECIPE_DATA:=.wt/recipe-data}"
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
lane() {  # cores, sets...
  local cores=$1; shift
  timeout "${CPU_LANE_S:-230}" python3 $R --data-dir "$RECIPE_DATA" --device cpu --cores "$cores" --recipes default \
    --seeds 0 --datasets "$@" --hardware cpu2-emulated --suffix="-run3-lane${cores/,/-}" --out "$OUT" \
    >"$OUT/cpu-lane-${cores/,/-}.log" 2>&1
}
lane 0,1 shapes-circle-square shapes-small stripes digits-3v7 lfw-faces &
lane 2,3 shapes-triangle-star shapes-clutter photo-textures digits-5 &
pin 4-15 timeout "${ALONE_S:-30}" python3 $R --data-dir "$RECIPE_DATA" --device cuda --hardware h200 \
  --suffix=-run3-alone --recipes default --seeds 0 --alone-seeds 0 --only-alone \
  --datasets shapes-circle-square digits-5 --out "$OUT" >"$OUT/gpu-alone.log" 2>&1
date -u +"alone %T" | tee -a "$OUT/timeline.log"
pin 14,15 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_train_gpu.py \
  >"$OUT/gpu-tests.log" 2>&1 &
pin 4-13 timeout "${GPU_TABLE_S:-110}" python3 $R --data-dir "$RECIPE_DATA" --device cuda --hardware h200 \
  --suffix=-run3 --jobs 10 --out "$OUT" >"$OUT/gpu-table.log" 2>&1
date -u +"table %T" | tee -a "$OUT/timeline.log"
pin 4-15 timeout "${VARIANT_S:-40}" python3 $R --data-dir "$RECIPE_DATA" --device cuda --hardware h200 \
  --suffix=-run3-variants --recipes steps-2000 size-128 --jobs 12 --datasets shapes-small shapes-triangle-star \
  --out "$OUT" \
  >"$OUT/gpu-crop.log" 2>&1
date -u +"variants %T" | tee -a "$OUT/timeline.log"
pin 4-15 timeout 40 python3 benchmarks/scripts/train_throughput_aug.py --recipes none default --out "$OUT" \
  >"$OUT/throughput.log" 2>&1
date -u +"throughput %T" | tee -a "$OUT/timeline.log"
wait
date -u +"end %T" | tee -a "$OUT/timeline.log"
tar -czf "$FINAL/train-recipe-results.tgz" -C "$OUT" .
for f in "$OUT"/train-recipe_h200_*-run3.md "$OUT"/train-recipe_h200_*-alone.md "$OUT"/train-recipe_h200_*-variants.md \
  "$OUT"/train-throughput-aug.md; do grep "^|" "$f" | grep -v -- "---"; done 2>/dev/null
tail -n 3 "$OUT"/gpu-tests.log "$OUT"/cpu-lane-*.log
