#!/usr/bin/env bash
# Every GPU result of a session, in one lease on nvidia-h200-x2 (needs .whl/numpy-2.4.6-cp312-*.whl carried):
#   bash benchmarks/scripts/h200_session.sh [FIRST] -- [LANE_A] -- [LANE_B] -- [LAST]
# Each section lists steps (functions below). FIRST runs alone with both GPUs visible; LANE_A and LANE_B run side by
# side, each pinned to one GPU and 16 of the host's 32 cores (as on a one-GPU H200 host); LAST runs alone on both.
# Without arguments: the whole set, as run for the first session of 2026-11-30 (its `baseline` step then wrote a
# --quick baseline; it now checks the shipped one).
# Each section's folder lands in $OUT/<first|a|b|last>.tgz as it ends; the logs print last.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/gk; rm -rf "$W"; mkdir -p "$W"/{a,b,c,info}
rm -rf /tmp/np246 && python3 -m zipfile -e .whl/numpy-2.4.6-cp312-*.whl /tmp/np246
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
NP246=/tmp/np246:$ROOT/src

# ---- steps; $D is the step's output folder
info() {  # gpukit info / doctor, on the stock numpy 2.5 and with numpy 2.4.6 first on the path
  PYTHONPATH=src python3 -m gpukit info --json > "$D/info.json"; echo "info rc=$?"
  PYTHONPATH=src python3 -m gpukit info > "$D/info.txt" 2>&1
  PYTHONPATH=src python3 -m gpukit doctor --json > "$D/doctor.json"; echo "doctor rc=$?"
  PYTHONPATH=src python3 -m gpukit doctor > "$D/doctor.txt" 2>&1
  PYTHONPATH=$NP246 python3 -m gpukit doctor --json > "$D/doctor_numpy246.json"; echo "doctor(numpy 2.4.6) rc=$?"
  PYTHONPATH=$NP246 python3 -m gpukit doctor > "$D/doctor_numpy246.txt" 2>&1
}
sweep() {  # gpukit bench --sweep, then its report as HTML and Markdown
  PYTHONPATH=$NP246 timeout -s INT "${SWEEP_S:-300}" python3 -m gpukit bench --sweep --sweep-budget "${SWEEP_BUDGET:-240}" \
    --db "$D/results.db" --json > "$D/sweep.json" 2> "$D/sweep.err"; echo "sweep rc=$?"; tail -1 "$D/sweep.err"
  PYTHONPATH=$NP246 python3 -m gpukit report --last --db "$D/results.db" -o "$D/report.html" > "$D/report.log" 2>&1
  PYTHONPATH=$NP246 python3 -m gpukit report --last --db "$D/results.db" -o "$D/report.md" --format md --json \
    > "$D/report.json" 2>> "$D/report.log"; echo "report rc=$?"
}
train() { PYTHONPATH=$NP246 timeout 150 python3 benchmarks/scripts/train_throughput.py --out "$D" > "$D/train.log" 2>&1; echo "train rc=$?"; }
accept() { PYTHONPATH=$NP246 timeout 220 python3 examples/gpu_acceptance.py --out "$D" --part 1 > "$D/accept.log" 2>&1; echo "acceptance rc=$?"; }
gib() {  # issue 5's 1 GiB comparison, written as a baseline too; the int32 add; the seed example
  PYTHONPATH=$NP246 timeout 180 python3 -m gpukit bench vector-add saxpy --size 1GiB --device cuda --db "$D/results.db" \
    --json --markdown "$D/gib.md" --write-baseline "$D/h200.json" > "$D/gib.json" 2> "$D/gib.err"; echo "gib rc=$?"
  PYTHONPATH=$NP246 timeout 120 python3 -m gpukit bench vector-add --size 1GiB:int32 --device cuda --db "$D/results.db" \
    --json --markdown "$D/gib_int32.md" > "$D/gib_int32.json" 2> "$D/gib_int32.err"; echo "gib int32 rc=$?"
  PYTHONPATH=$NP246 timeout 60 python3 -m gpukit bench vector-add --seed-example --db "$D/results.db" > "$D/seed_example.txt" 2>&1
  echo "seed example rc=$?"
}
energy() {  # the same rows again with NVML energy per call: a second sample of the ratios, and --energy exercised
  PYTHONPATH=$NP246 timeout 180 python3 -m gpukit bench vector-add saxpy --size 1GiB --device cuda --energy \
    --db "$D/results.db" --json --markdown "$D/energy.md" > "$D/energy.json" 2> "$D/energy.err"; echo "energy rc=$?"
}
baseline() {  # a baseline (default: the one gpukit ships) checked on this node (exit 0: every row within tolerance)
  PYTHONPATH=$NP246 timeout 180 python3 -m gpukit bench vector-add saxpy --size 1GiB --device cuda --baseline "${BASELINE:-h200}" \
    --db "$D/results.db" > "$D/baseline_check.log" 2>&1; echo "shipped baseline check rc=$?"
}
quick() {  # issue 5: gpukit bench --quick in <= 60 s on the H200
  local t0 rc; t0=$(date +%s%N)
  PYTHONPATH=$NP246 timeout 120 python3 -m gpukit bench --quick --db "$D/results.db" --json > "$D/quick.json" 2> "$D/quick.err"
  rc=$?; echo "quick rc=$rc wall=$(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
trainchk() {  # the training-step gradient check at the batches where the first sweep's fp32 check misfired
  PYTHONPATH=$NP246 timeout 240 python3 -m gpukit bench mlp-train --size 2048:fp32 --size 8192:fp32 --size 32768:fp32 \
    --size 8192:bf16 --size 32768:bf16 --device all --db "$D/results.db" --json --markdown "$D/mlp.md" \
    > "$D/mlp.json" 2> "$D/mlp.err"; echo "mlp-train rc=$?"
  PYTHONPATH=$NP246 timeout 240 python3 -m gpukit bench cnn-train --size 32:fp32 --size 256:fp32 --size 256:bf16 \
    --device all --db "$D/results.db" --json --markdown "$D/cnn.md" > "$D/cnn.json" 2> "$D/cnn.err"; echo "cnn-train rc=$?"
}
kernels() { PYTHONPATH=$NP246 timeout 90 python3 -m pytest -q tests/gpu/test_kernels_gpu.py > "$D/kernels_gpu.log" 2>&1; echo "kernel GPU tests rc=$?"; }
enginetests() { PYTHONPATH=$NP246 timeout 150 python3 -m pytest -q tests/gpu/test_bench_engine_gpu.py > "$D/engine_gpu.log" 2>&1; echo "engine GPU tests rc=$?"; }
plan() { PYTHONPATH=$NP246 timeout 150 python3 benchmarks/scripts/plan_grid.py --out "$D" > "$D/plan.log" 2>&1; echo "plan grid rc=$?"; }
ddp() { timeout 120 python3 benchmarks/scripts/train_ddp.py --out "$D" --images 16384 --epochs 4 > "$D/ddp.log" 2>&1; echo "DDP rc=$?"; }

run_steps() {  # run_steps LANE STEP… : each step in its own folder under $W/LANE
  local lane=$1; shift
  for step in "$@"; do
    D="$W/$lane/$step"; mkdir -p "$D"; stamp "$lane: $step"; "$step"
  done
  stamp "$lane: done"
  tar czf "$OUT/$lane.tgz" -C "$W" "$lane" 2>/dev/null  # each lane's results come back even if a later one is cut
}
export -f run_steps stamp info sweep train accept gib energy baseline quick trainchk kernels enginetests plan ddp
export W T0 NP246 ROOT OUT

if [ $# -eq 0 ]; then set -- info -- sweep train -- accept baseline plan -- ddp; fi
sections=(); cur=""
for arg in "$@"; do
  if [ "$arg" = "--" ]; then sections+=("$cur"); cur=""; else cur="$cur $arg"; fi
done
sections+=("$cur")
first=${sections[0]:-}; lane_a=${sections[1]:-}; lane_b=${sections[2]:-}; last=${sections[3]:-}

run_steps first $first > "$W/first.log" 2>&1
taskset -c 0-15 env CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=16 NUMBA_NUM_THREADS=16 \
  bash -c "run_steps a $lane_a" > "$W/a.log" 2>&1 &
taskset -c 16-31 env CUDA_VISIBLE_DEVICES=1 OMP_NUM_THREADS=16 NUMBA_NUM_THREADS=16 \
  bash -c "run_steps b $lane_b" > "$W/b.log" 2>&1 &
wait
run_steps last $last > "$W/last.log" 2>&1
cat "$W/first.log" "$W/a.log" "$W/b.log" "$W/last.log"
ls -la "$OUT"
