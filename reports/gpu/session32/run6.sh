#!/usr/bin/env bash
# select_topk's radix searches take 11-bit digits (11, 11, 10: 2 passes
# over the cached keys after the first, 3 before with 8-bit digits),
# histograms of 2048 bins, warp 0 finding the bin 64 bins a lane. Checks:
# token top-k against float64 (uncertified budgets, short caches, the
# prefilter's long caches), the certificate test (open extras ranked a
# list of 1024 at a time), memcheck on the prefilter caches, racecheck on
# the certificate test.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads|near-tie|OK \]'
step topk 400 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionTokenTopK.*'
step certificate 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure|RACECHECK SUMMARY'
step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*PrefilterCaches*'
step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
echo "=== done $(date +%T)"
