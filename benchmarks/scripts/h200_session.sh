#!/usr/bin/env bash
# One lease on nvidia-h200-x2 for every GPU result of this session, run as:
#   bash benchmarks/scripts/h200_session.sh            (needs .whl/numpy-2.4.6-cp312-*.whl carried)
# Two lanes run side by side, each pinned to one GPU and 16 of the host's 32 cores (as on a one-GPU H200 host):
#   lane A (GPU 0, cores 0-15):  gpukit bench --sweep → gpukit report (html, md); seed-CNN training throughput
#   lane B (GPU 1, cores 16-31): bench acceptance (quick, 1 GiB, Mandelbrot, seed frame); H200 baseline; plan grid
# then DDP on both GPUs. gpukit info / doctor run first, alone, with both GPUs visible.
# Everything lands in $OUT/results.tgz plus a few summaries; the summary table prints last.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/gk; rm -rf "$W"; mkdir -p "$W"/{a,b,c,info}
rm -rf /tmp/np246 && python3 -m zipfile -e .whl/numpy-2.4.6-cp312-*.whl /tmp/np246
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

stamp "info / doctor (stock numpy, then numpy 2.4.6)"
PYTHONPATH=src python3 -m gpukit info --json > "$W/info/info.json"; echo "info rc=$?"
PYTHONPATH=src python3 -m gpukit info > "$W/info/info.txt" 2>&1
PYTHONPATH=src python3 -m gpukit doctor --json > "$W/info/doctor.json"; echo "doctor rc=$?"
PYTHONPATH=src python3 -m gpukit doctor > "$W/info/doctor.txt" 2>&1
PYTHONPATH=/tmp/np246:src python3 -m gpukit doctor --json > "$W/info/doctor_numpy246.json"; echo "doctor(numpy 2.4.6) rc=$?"
PYTHONPATH=/tmp/np246:src python3 -m gpukit doctor > "$W/info/doctor_numpy246.txt" 2>&1

export PYTHONPATH=/tmp/np246:$ROOT/src OMP_NUM_THREADS=16 NUMBA_NUM_THREADS=16 MKL_NUM_THREADS=16

lane_a() {
  export CUDA_VISIBLE_DEVICES=0
  stamp "A: sweep"
  timeout -s INT 280 python3 -m gpukit bench --sweep --db "$W/a/results.db" --json > "$W/a/sweep.json" 2> "$W/a/sweep.err"
  echo "A: sweep rc=$?"
  python3 -m gpukit report --last --db "$W/a/results.db" -o "$W/a/report.html" > "$W/a/report.log" 2>&1
  python3 -m gpukit report --last --db "$W/a/results.db" -o "$W/a/report.md" --format md --json > "$W/a/report.json" 2>> "$W/a/report.log"
  echo "A: report rc=$?"
  stamp "A: train throughput"
  timeout 150 python3 benchmarks/scripts/train_throughput.py --out "$W/a/train" > "$W/a/train.log" 2>&1
  echo "A: train rc=$?"; stamp "A: done"
}
lane_b() {
  stamp "B: acceptance part 1"
  timeout 220 python3 examples/gpu_acceptance.py --out "$W/b/accept" --part 1 > "$W/b/accept.log" 2>&1
  echo "B: acceptance rc=$?"
  stamp "B: H200 baseline (quick, GPU rows)"
  timeout 60 python3 -m gpukit bench --quick --device cuda --db "$W/b/results.db" --write-baseline "$W/b/h200.json" \
    --markdown "$W/b/baseline.md" > "$W/b/baseline.log" 2>&1
  echo "B: baseline rc=$?"
  stamp "B: plan grid"
  timeout 150 python3 benchmarks/scripts/plan_grid.py --out "$W/b/plan" > "$W/b/plan.log" 2>&1
  echo "B: plan rc=$?"; stamp "B: done"
}
export -f lane_a lane_b stamp; export W T0
taskset -c 0-15 bash -c lane_a > "$W/a/lane.log" 2>&1 &
taskset -c 16-31 env CUDA_VISIBLE_DEVICES=1 bash -c lane_b > "$W/b/lane.log" 2>&1 &
wait
unset CUDA_VISIBLE_DEVICES
stamp "DDP on both GPUs"
timeout 120 python3 benchmarks/scripts/train_ddp.py --out "$W/c" --images 16384 --epochs 4 > "$W/c/ddp.log" 2>&1
echo "DDP rc=$?"
stamp "packing"
tar czf "$OUT/results.tgz" -C "$W" . 2>/dev/null
cp "$W/a/report.md" "$OUT/" 2>/dev/null; cp "$W/info/doctor.txt" "$OUT/" 2>/dev/null
cat "$W/a/lane.log" "$W/b/lane.log"
tail -5 "$W/a/train.log" "$W/b/plan.log" "$W/c/ddp.log" "$W/b/accept.log" 2>/dev/null
ls -la "$OUT"
