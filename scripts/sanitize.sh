#!/usr/bin/env bash
# Builds condensate with AddressSanitizer and UBSan (-DCONDENSATE_SANITIZE=ON)
# into build-sanitize/ and runs the CPU test suite under them. GPU tests skip
# as usual. Extra arguments go to ctest (e.g. -R Policy).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >/dev/null
B=${SANITIZE_BUILD_DIR:-build-sanitize}
if [ ! -f "$B/build.ninja" ]; then
  cmake -G Ninja -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DCONDENSATE_SANITIZE=ON
fi
# LLVM's and MLIR's static libraries are not instrumented: their own
# SmallVector poisoning and inlined containers read as errors unless
# user poisoning and container-overflow checks are off. The build runs
# condensate-translate (the AOT test library), so these apply to it too.
export ASAN_OPTIONS=allow_user_poisoning=0:detect_container_overflow=0:detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The certificate's bulk property test makes over 10^6 checks in the normal
# run; instrumented it is 3-4x slower, so here it runs 150 of its caches.
export CONDENSATE_CERTIFICATE_CACHES=${CONDENSATE_CERTIFICATE_CACHES:-150}
cmake --build "$B"
cd "$B" && ctest --output-on-failure -j"$(nproc)" "$@"
