# Sourced by the serving A/B device scripts, after device_site.sh and with R set (the run folder, /tmp/<name>):
#   one NAME ARGS...   one `serve_profile.py --no-spy` run (8 s, the middle 3 counted) into $R/NAME, its last line
#                      printed, at most ONE_TIMEOUT_S seconds (default 200);
#   save               $R to $OUT/<name>.tgz, after every run: a call cut short still brings back what it measured.
P="python3 benchmarks/scripts/serve_profile.py --duration 8 --window 3 --no-spy --keep-work"
save() { (cd "$(dirname "$R")" && tar -czf "$OUT/$(basename "$R").tgz" "$(basename "$R")"); }
one() {
  local out=$1; shift
  echo "== $out $(date +%T)"
  timeout "${ONE_TIMEOUT_S:-200}" $P --out "$R/$out" "$@" 2>&1 | tail -1
  save
}
