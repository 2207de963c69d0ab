#!/usr/bin/env bash
# Session 17, second GPU call: compute-sanitizer memcheck and racecheck of
# the certificate's CPU = GPU check (open extras: the shared-memory marks).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY'
for tool in memcheck racecheck; do
  step $tool 280 compute-sanitizer --tool $tool --error-exitcode 9 \
    $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
done
echo "=== done $(date +%T)"
