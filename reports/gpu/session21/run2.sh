#!/usr/bin/env bash
# Session 21, second GPU call: score_sketch on tensor cores against the
# float64 reference and the CPU certificate (sketch top-k at pages of 64,
# 2- and 4-bit; the certificate's sketch layer at pages of 16; attention
# shapes whose certified sketch layer takes the mma path: groups 1, 4, 7
# and 8; contexts to 131072), and memcheck.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|certificate|layer'
step tests 420 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:GPUAttentionTokenTopK.*:GPUAttentionLarge.*:*d128_kv8_g4_p64_bf16*:*d128_kv2_g7_p64_bf16*:*d128_kv1_g8_p16_bf16*:*d64_kv2_g1_p64_bf16*'
step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
echo "=== done $(date +%T)"
