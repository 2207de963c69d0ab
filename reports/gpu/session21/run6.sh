#!/usr/bin/env bash
# Session 21, sixth GPU call: score_sketch on tensor cores for groups of 5 to
# 8 only (CUDA cores for 4 and less, faster there: run5/), both kernels with
# the per-channel slack weight, against the float64 reference and the CPU
# certificate; memcheck; then end to end at 130000 tokens on the dummy
# Qwen2.5-7B (group 7), dense against the sketch, block and certified
# sketch policies.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|certificate'
step tests 330 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:GPUAttentionTokenTopK.*:*d128_kv8_g4_p64_bf16*:*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*:*d128_kv1_g8_p16_bf16*'
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv2_g7_p64_bf16*'
STEPS=e2e E2E_CERTIFIED=1 E2E_RUNS="qwen2.5-7b:130000:4" \
  bash bench/gpu_session.sh
echo "=== done $(date +%T)"
