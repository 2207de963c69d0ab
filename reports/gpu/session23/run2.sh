#!/usr/bin/env bash
# Session 23, second GPU call: score_sketch on tensor cores reworked (a
# lane's eight tokens one word row, one 16-byte load a k-step, a_c in two
# bf16 parts, two k-steps chained in the mma addend). Token top-k against
# float64 (groups 1, 3, 4, 7; 2- and 4-bit), the certified attention shapes
# whose 4-bit sketch layers run on tensor cores (eps_hat >= true omitted
# mass on every head), the certificate against the CPU's; memcheck and
# racecheck on the short caches (groups 4 and 7).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|certificate CPU'
step topk 280 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.*:GPUCertificate.*'
step attention 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv8_g4_p64_bf16*:*d128_kv2_g7_p64_bf16*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Failure|hazard'
step memcheck 80 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
echo "=== done $(date +%T)"
