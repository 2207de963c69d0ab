#!/usr/bin/env bash
# Session 18, first GPU call: the tensor-core attention body (bf16 caches,
# head_dim 64/128, group <= 16) against the float64 reference on every
# GPUAttention shape (incl. groups 7 and 16), the certificate and token
# top-k suites, then memcheck and racecheck on two tensor-core shapes.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]|ERROR SUMMARY|RACECHECK SUMMARY|passes'
step attention 330 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:Shapes/GPUAttention.*:GPUAttentionTokenTopK.*'
step memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv1_g16_p16_bf16*'
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
echo "=== done $(date +%T)"
