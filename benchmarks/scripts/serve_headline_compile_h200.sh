#!/bin/bash
# Issue 27's headline run on one H200 (benchmarks/serve-engine-default_h200_2026-12-04.md, call 2): ResNet-50 with
# --engine compile beside LitServe 0.2.19 (1 and 2 workers) and wrk; a second start of the same server from the
# engine cache; the seed CNN (eager) with 8 HTTP workers and with one a core and a 3 ms wait (seed/gpukit-wide),
# beside LitServe and wrk; the seed CNN with 12 and 16 HTTP workers.
#   WHEELS=<serving + litserve wheels> OUT=/tmp/out bash benchmarks/scripts/serve_headline_compile_h200.sh
# PARTS (default "resnet restart seed workers"): which of them run; "tests" adds the GPU serve tests first, "probe"
# the host's wake-up round trips and core speed (host_wakeup_probe.py) before the rest, "seedknobs" the seed CNN
# (gpukit only, wrk beside) with a longer batch wait and more HTTP workers against the default, alternating twice:
# on hosts with slow cores its batches split (benchmarks/serve-headline_2026-12-06.md); KNOBS and ROUNDS choose
# the option sets and how often; "loadgen" the load generator's own CPU a request (loadgen_cpu.py), LOADGEN_OLD's
# src folder against this tree's. SEED_ONLY: the seed part's points (serve_h200.py --only). "starts": the ResNet-50
# server started again STARTS times (serve_placement_probe.py: gpukit loadtest, then wrk, per start; default
# "free free free", "pinned" for --model-cpus 4), for the spread between starts; after "resnet", from its cache.
# "rows": the same starts with passes of at most 64 rows (GRAPH_ROWS, today's) and 128 (a copy of src with the
# constant changed, SERVE_SRC), in the order 64 128 128 64, AB_S seconds of load each (8). "nap": the same with the
# executor's nap before its GPU wait (today's) against a spin through all of it (SPIN_TAIL_S = 1e9).
# "wide": the seed CNN, then ResNet-50, with 8 HTTP workers against 16 (abopt), then one round of each with
# `--workers 1`; AB_S seconds of load each, SEED_ROUNDS and RESNET_ROUNDS the two A/Bs' rounds (abopt's ROUNDS).
# wrk: the Debian packages wrk, libluajit-5.1-2 and libluajit-5.1-common as .deb files in .deb/ (unpacked there).
set -u
cd "$(dirname "$0")/../.."
R=/tmp/r
source benchmarks/scripts/device_site.sh $R/host.txt || exit 1
for f in .deb/*.deb; do dpkg -x "$f" .deb; done
export LD_LIBRARY_PATH=$PWD/.deb/usr/lib/x86_64-linux-gnu
.deb/usr/bin/wrk --version 2>&1 | head -1
PARTS=${PARTS:-resnet restart seed workers}
part() { [[ " $PARTS " == *" $1 "* ]]; }
save() { (cd /tmp && tar -czf "$OUT/r.tgz" r); }  # after each part: a call cut short still brings back the rest
if part probe; then
  echo "== host wake-ups $(date +%T)"
  timeout 60 python3 benchmarks/scripts/host_wakeup_probe.py --out $R/host-wakeup.json | tr -d '\n ' | head -c 400; echo; save
fi
if part tests; then
  echo "== gpu tests $(date +%T)"
  timeout 200 python3 -m pytest -q tests/gpu/test_serve_gpu.py tests/gpu/test_serve_engine_gpu.py -p no:cacheprovider > $R/gpu-tests.log 2>&1; tail -3 $R/gpu-tests.log; save
fi
if part resnet; then
echo "== resnet compile $(date +%T)"
GPUKIT_SERVE_ENGINE=compile SERVE_READY_S=300 timeout 420 python3 benchmarks/scripts/serve_h200.py --out $R/res --only resnet/gpukit-nvjpeg,resnet/litserve-w1,resnet/litserve-w2 2>&1 | grep -v "^ *$" | tail -12; save
fi
if part starts; then
  echo "== resnet starts $(date +%T)"
  SERVE_KEEP_WORK=1 GPUKIT_SERVE_ENGINE=compile SERVE_READY_S=300 timeout 330 python3 \
    benchmarks/scripts/serve_placement_probe.py --out $R/starts --order "${STARTS:-free free free}" --budget-s 240 \
    2>&1 | cut -c1-160; save
fi
if part restart; then
echo "== cached compile restart $(date +%T)"
python3 - <<'PY' 2>&1 | tail -3
import subprocess, time, urllib.request, os, signal, sys, json
sys.path.insert(0, "benchmarks/scripts")
import serve_h200 as sh
port = sh.free_port()
t0 = time.monotonic()
p = subprocess.Popen([sys.executable, "-m", "gpukit", "serve", "/tmp/serve_h200_work/resnet50", "--device", "cuda", "--port", str(port), "--workers", "8", "--max-batch", "128", "--decode", "nvjpeg", "--engine", "compile", "--amp", "bf16", "--quiet"], stdout=open("/tmp/r/restart.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
ok = False
while time.monotonic() - t0 < 240 and p.poll() is None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            if r.status == 200: ok = True; break
    except OSError: pass
    time.sleep(0.3)
ready = time.monotonic() - t0
info = {}
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/model", timeout=5) as r: info = json.load(r)
except OSError: pass
os.killpg(p.pid, signal.SIGTERM); p.wait(40)
json.dump({"ready": ok, "ready_s": round(ready, 1), "engine": info.get("engine")}, open("/tmp/r/restart.json", "w"), indent=1)
print("cached restart", ok, round(ready, 1), (info.get("engine") or {}).get("cached"), (info.get("engine") or {}).get("build_s"))
PY
fi
if part seed; then
echo "== seed $(date +%T)"
timeout 300 python3 benchmarks/scripts/serve_h200.py --out $R/seed --only ${SEED_ONLY:-seed/gpukit,seed/gpukit-wide,seed/litserve-w2,seed/litserve-w1} 2>&1 | grep -v "^ *$" | tail -12; save
fi
# The rounds of an A/B, one start each: abrounds NAME MODEL 'ROUNDS' B_SRC 'B_OPTIONS' — each round is named by its
# arm ("a-1 b-1 b-2 a-2"); A serves this tree's src as serve_placement_probe.py starts it (8 HTTP workers), B serves
# B_SRC (SERVE_SRC) with B_OPTIONS added last (GPUKIT_SERVE_EXTRA); AB_S seconds of gpukit loadtest then of wrk (8)
abrounds() {
  local engine=compile v src extra; [ "$2" = seed ] && engine=eager
  for v in $3; do
    echo "== $1 $v $(date +%T)"
    src=$PWD/src extra=; [ "${v%-*}" = b ] && src=$4 extra=$5
    SERVE_SRC=$src GPUKIT_SERVE_EXTRA="$extra" SERVE_KEEP_WORK=1 GPUKIT_SERVE_ENGINE=$engine SERVE_READY_S=300 \
      timeout 200 python3 benchmarks/scripts/serve_placement_probe.py --out $R/$1/$v --model $2 --order free \
      --duration ${AB_S:-8} 2>&1 | cut -c1-160; save
  done
}
# A/B of one constant of src, ResNet-50 compile, rounds A B B A: ab NAME 'sed expression' — B is a copy of src with
# the expression applied
ab() {
  rm -rf /tmp/src-$1 && cp -r src /tmp/src-$1 && sed -i "$2" /tmp/src-$1/gpukit/serve/model.py
  if cmp -s src/gpukit/serve/model.py /tmp/src-$1/gpukit/serve/model.py; then echo "$1: '$2' changed nothing"; return; fi
  abrounds "$1" resnet "a-1 b-1 b-2 a-2" /tmp/src-$1 ""
}
# A/B of `gpukit serve` options: abopt NAME MODEL 'options' [ROUNDS] — B is this tree with the options added last;
# ROUNDS as abrounds' (default "a-1 b-1 b-2 a-2")
abopt() { abrounds "$1" "$2" "${4:-a-1 b-1 b-2 a-2}" "$PWD/src" "$3"; }
if part wide; then  # b: an HTTP worker a vCPU; then one round of each with a single process (HTTP and model)
  abopt wide-seed seed '--workers 16' "${SEED_ROUNDS:-a-1 b-1 b-2 a-2}"; abopt one-seed seed '--workers 1' b-1
  abopt wide-resnet resnet '--workers 16' "${RESNET_ROUNDS:-a-1 b-1 b-2 a-2}"; abopt one-resnet resnet '--workers 1' b-1
fi
part rows && ab rows 's/^GRAPH_ROWS = 64 /GRAPH_ROWS = 128 /'  # a: 64 rows a pass (today), b: 128
part nap && ab nap 's/^SPIN_TAIL_S = 0.001 /SPIN_TAIL_S = 1e9 /'  # a: nap, then spin the last 1 ms; b: spin it all
if part loadgen; then  # the load generator's own CPU a request: LOADGEN_OLD (a gpukit src folder) against this tree
  echo "== loadgen $(date +%T)"
  timeout 120 python3 benchmarks/scripts/loadgen_cpu.py --src old=${LOADGEN_OLD:-src} --src new=src --rounds 3 \
    --out $R/loadgen-cpu.json 2>&1 | tail -1; save
fi
if part seedknobs; then
  # KNOBS: "|"-separated option sets, an empty one the default, put first ("|--workers 16": bash drops a trailing
  # empty field); default: the five below. ROUNDS: how often each (2)
  IFS='|' read -r -a knobs <<< "${KNOBS-|--max-wait-ms 3|--workers 12|--workers 16|--workers 16 --max-wait-ms 3}"
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for knob in "${knobs[@]}"; do
      name=default; [ -n "$knob" ] && name=${knob//[ -]/}  # maxwaitms3, workers12, workers16maxwaitms3 …
      echo "== seed knob ${name} round $round $(date +%T)"
      SERVE_KEEP_WORK=1 GPUKIT_SERVE_EXTRA="$knob" timeout 90 python3 benchmarks/scripts/serve_h200.py \
        --out $R/seedknobs/$name-$round --only seed/gpukit 2>&1 | grep -E "c=64|wrk" | cut -c1-160
    done
    save
  done
fi
part workers && for w in 12 16; do
  echo "== seed pil workers $w $(date +%T)"
  timeout 120 python3 benchmarks/scripts/serve_profile.py --out $R/w$w --only seed/pil --duration 8 --window 3 --no-spy --serve-args "--workers $w" 2>&1 | tail -1
done
date >> $R/host.txt; save
