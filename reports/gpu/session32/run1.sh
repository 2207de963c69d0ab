#!/usr/bin/env bash
# certify's fast walk (open extras: the last slot empty): a grid kernel
# (certify_sums) sums each run of 32 slots, certify's warps find the first
# run within tau from suffix sums and warp 0 the slot in it; no pass over
# every unit. Checks: the certificate test (CPU = GPU decisions; open
# extras walking past 1024 slots, the capped 2048 layer, near-ties
# counted), racecheck and memcheck on it.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads|near-tie'
step certificate 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure|RACECHECK SUMMARY'
step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
echo "=== done $(date +%T)"
