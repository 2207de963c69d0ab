#!/usr/bin/env bash
# Session 19, first GPU call: the final tensor-core kernels of session 18
# plus this session's query-fragment fill, against the float64 reference
# (every GPUAttention shape, the certificate, the autotuner's own test),
# then compute-sanitizer memcheck (group 16 on tensor cores, f32 lane
# groups, append) and racecheck (d128 group 4 on tensor cores).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|RACECHECK SUMMARY|best|rejected'
step attention 400 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='-GPUAttentionLarge.*'
step memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d64_kv1_g16_p16_bf16*:*d64_kv3_g3_p16_f32*:GPUAppend.*'
step racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
echo "=== done $(date +%T)"
