#!/usr/bin/env bash
# Session 20, second GPU call: the selection prefilter (token top-k over
# long contexts) against the float64 reference and the CPU certificate,
# then compute-sanitizer memcheck and racecheck on the certificate test
# (its last round takes the prefilter, with ranked extras).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|RACECHECK SUMMARY|certificate|n_max 70001|n_max 20000|n_max 131072|worst'
step select 280 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionTokenTopK.*:GPUCertificate.*:GPUAttentionLarge.*'
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
echo "=== done $(date +%T)"
