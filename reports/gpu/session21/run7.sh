#!/usr/bin/env bash
# Session 21, seventh GPU call: the final rule (tensor cores for pages of 64
# and groups of 5-8): the token top-k test now also runs 7 query heads a kv
# head (2- and 4-bit, discrete and continuous keys, to 70001 tokens) and a
# group-7 attention shape.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|14 query heads.*keys 0, n_max 20000'
step tests 300 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionTokenTopK.*:*d128_kv2_g7_p64_bf16*'
echo "=== done $(date +%T)"
