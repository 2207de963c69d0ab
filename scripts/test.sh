#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs every test: the lit/FileCheck
# IR suite and the GoogleTest suites through ctest (GPU tests skip, saying
# why, on machines without an NVIDIA GPU), the Python package's tests
# (scripts/python-tests.sh: torch from PyPI), then each fuzz target for 30 s
# (scripts/fuzz.sh; FUZZ_SECONDS=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)")
./scripts/python-tests.sh
if [ "${FUZZ_SECONDS:-30}" != 0 ]; then
  ./scripts/fuzz.sh
fi
