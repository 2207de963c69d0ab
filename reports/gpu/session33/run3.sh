#!/usr/bin/env bash
# Session 33, GPU call 3: the final build's checks, what the session's GPU
# time left allows: select's bitonic rounds a thread a pair (Select.cpp)
# through the certificate test (CPU = GPU decisions, lists of extras) and
# racecheck of the d128_kv8_g4_p64_bf16 shape whose two-entry lists raced
# in run 2 (and its attention against float64).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
STEP_FILTER='PASSED|FAILED|Failure|heads|SUMMARY'
step certificate 60 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
step racecheck 130 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
echo "=== done $(date +%T)"
