#!/usr/bin/env bash
# Builds condensate's libFuzzer targets (test/fuzz/) with clang and runs
# each for FUZZ_SECONDS (default 30) from its seed corpus, after replaying
# every committed regression input. Needs the main build (scripts/setup.sh)
# for FuzzPolicyMLIR, which links the compiler library.
#   scripts/fuzz.sh                    all targets, 30 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh FuzzGGUF
# A crash leaves its input under build/fuzz/artifacts/<target>/ and fails;
# add it to test/fuzz/regressions/<target>/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
SECONDS_EACH=${FUZZ_SECONDS:-30}
CXX=${FUZZ_CXX:-clang++-14}
command -v "$CXX" >/dev/null ||
  { echo "fuzz.sh: $CXX not found (scripts/setup.sh installs clang-14)" >&2; exit 1; }
OUTDIR=$B/fuzz
mkdir -p "$OUTDIR"
FLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iruntime/include -Idialect/include -Iruntime/model)
MODEL=(runtime/model/GGUFValue.cpp runtime/model/GGUFParser.cpp
       runtime/model/GGUFFile.cpp runtime/model/Dequant.cpp
       runtime/model/Tokenizer.cpp runtime/model/Unicode.cpp)
CORE=(runtime/core/Policy.cpp runtime/core/PolicyJSON.cpp)
build() { # build TARGET SOURCES...
  local t=$1; shift
  echo "building $t"
  "$CXX" "${FLAGS[@]}" "test/fuzz/$t.cpp" "$@" -o "$OUTDIR/$t"
}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(FuzzGGUF FuzzPolicyJSON FuzzManifest FuzzPolicyMLIR)
for t in "${targets[@]}"; do
  case $t in
    FuzzGGUF) build $t "${MODEL[@]}" ;;
    FuzzPolicyJSON) build $t "${CORE[@]}" ;;
    FuzzManifest) build $t "${CORE[@]}" runtime/core/Files.cpp \
        runtime/gpu/Library.cpp dialect/lib/ABI/LaunchPlan.cpp ;;
    FuzzPolicyMLIR)
      # The compiler library is built by g++ and not instrumented.
      cmake --build "$B" --target CondensateCompiler >/dev/null
      build $t -L"$B/runtime" -lCondensateCompiler -lCondensateRuntime \
        -Wl,-rpath,"$PWD/$B/runtime" ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
done
status=0
for t in "${targets[@]}"; do
  work=$OUTDIR/corpus/$t; art=$OUTDIR/artifacts/$t/
  mkdir -p "$work" "$art"
  if compgen -G "test/fuzz/regressions/$t/*" >/dev/null; then
    echo "replaying test/fuzz/regressions/$t"
    "$OUTDIR/$t" -rss_limit_mb=2048 -timeout=10 test/fuzz/regressions/$t/* \
      2>"$OUTDIR/$t.regressions.log" || { echo "$t: a regression input fails"; status=1; continue; }
  fi
  echo "fuzzing $t for $SECONDS_EACH s"
  if "$OUTDIR/$t" "$work" "test/fuzz/corpus/$t" -max_total_time="$SECONDS_EACH" \
       -rss_limit_mb=2048 -timeout=10 -max_len=65536 -artifact_prefix="$art" \
       -print_final_stats=1 > "$OUTDIR/$t.log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov:" "$OUTDIR/$t.log" | tail -3
  else
    echo "$t: crashed; input in $art (log: $OUTDIR/$t.log)"; tail -30 "$OUTDIR/$t.log"; status=1
  fi
done
exit $status
