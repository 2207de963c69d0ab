# Sourced by GPU-machine scripts (bench/gpu_session.sh, the per-session
# scripts under reports/gpu/): unpacks the carried build
# (.carry/gpu.tar.xz, made by bench/pack_gpu.sh), points the runtime at it,
# and defines `step NAME SECONDS COMMAND...`, which runs COMMAND under a
# time limit into $OUT/NAME.log and echoes its tail (the lines matching
# $STEP_FILTER, an extended regex, when that is set).
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" .carry/run
tar xJf .carry/gpu.tar.xz -C .carry/run
export LD_LIBRARY_PATH=$PWD/.carry/run/lib:${LD_LIBRARY_PATH:-}
export CONDENSATE_CACHE_DIR=${CONDENSATE_CACHE_DIR:-/tmp/condensate-cache}
BIN=.carry/run/bin
step() {
  local name=$1 secs=$2; shift 2
  echo "=== $name ($(date +%T))"
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  if [ -n "${STEP_FILTER:-}" ]; then
    grep -E "$STEP_FILTER" "$OUT/$name.log" | tail -n 14
  else
    tail -n 25 "$OUT/$name.log"
  fi
  echo "=== $name rc=$rc"
}
