# Sourced by GPU-machine scripts (bench/gpu_session.sh, the per-session
# scripts under reports/gpu/): unpacks the carried build
# (.carry/gpu.tar.xz, made by bench/pack_gpu.sh) and the builds carried as
# deltas against it (bench/pack_delta.sh), points the runtime at it, and
# defines `step NAME SECONDS COMMAND...`, which runs COMMAND under a
# time limit into $OUT/NAME.log and echoes its tail (the lines matching
# $STEP_FILTER, an extended regex, when that is set).
# A device call ends at its limit and returns nothing of a command it
# kills, so the steps keep within $CALL_SECONDS (default 540) of the
# first source of this file in the call ($CALL_START, exported so that
# nested scripts share it): a step's limit is cut to what is left, and a
# step with less than 15 s left is skipped, saying so. CALL_SECONDS=0
# (a machine without that limit) runs every step to its own limit.
export CALL_START=${CALL_START:-$(date +%s)}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" .carry/run
# A call that needs only the libraries may carry them alone (a smaller
# archive of lib/, as reports/gpu/session45/ab.sh does).
[ -f .carry/gpu.tar.xz ] && tar xJf .carry/gpu.tar.xz -C .carry/run
# Other builds carried as deltas against it (bench/pack_delta.sh NAME):
# .carry/builds/NAME/lib, its compiler library beside the base's runtime.
# A delta that does not fit the base (one an earlier call left on a warm
# machine) leaves no build.
rm -rf .carry/builds
for d in .carry/*.xd3; do
  [ -f "$d" ] && [ -x .carry/xdelta3 ] || continue
  n=$(basename "$d" .xd3)
  mkdir -p ".carry/builds/$n/lib"
  cp .carry/run/lib/libCondensateRuntime.so ".carry/builds/$n/lib/"
  .carry/xdelta3 -d -f -s .carry/run/lib/libCondensateCompiler.so "$d" \
    ".carry/builds/$n/lib/libCondensateCompiler.so" || {
    echo "gpu_env.sh: $d does not rebuild against this base; no build $n" >&2
    rm -rf ".carry/builds/$n"
  }
done
export LD_LIBRARY_PATH=$PWD/.carry/run/lib:${LD_LIBRARY_PATH:-}
export CONDENSATE_CACHE_DIR=${CONDENSATE_CACHE_DIR:-/tmp/condensate-cache}
BIN=.carry/run/bin
step() {
  local name=$1 secs=$2; shift 2
  local left=$(( ${CALL_SECONDS:-540} - ($(date +%s) - CALL_START) ))
  [ "${CALL_SECONDS:-540}" -eq 0 ] && left=$secs
  if [ "$left" -lt 15 ]; then
    echo "=== $name skipped: ${left} s left of CALL_SECONDS=${CALL_SECONDS:-540}"
    return 0
  fi
  if [ "$secs" -gt "$left" ]; then
    echo "=== $name: limit cut from $secs to $left s (CALL_SECONDS)"
    secs=$left
  fi
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
