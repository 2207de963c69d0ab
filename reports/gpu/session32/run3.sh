#!/usr/bin/env bash
# The attention shapes against float64 whose schedules hold the certified
# sketch layers with many extras (open on the short contexts: the fast
# walk, with and without value boxes): groups 7 and 16, and group 3 f32.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|OK \]'
step shapes 500 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*:*d64_kv3_g3_p16_f32*'
echo "=== done $(date +%T)"
