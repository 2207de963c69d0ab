#!/usr/bin/env bash
# Session 36, GPU call 5: the tensor-core body's query-fragment fill with
# 8 entries a round, their loads issued together (before: one entry an
# iteration, each waiting for its loads). The cold benchmark of three
# shapes at B1 and B8 / 128K (to set against run 3's sweep of 220c23a, its
# SDPA rows the anchor), then the tensor-core attention shapes against
# float64 and memcheck of one.
set -u
O=$OUT
export OUT=/tmp/o5
source bench/gpu_env.sh
LIB=.carry/run/lib/libCondensateCompiler.so
step cold 120 python3 bench/bench_cold.py --lib $LIB \
  --shapes 32/8/128,14/2/64,8/1/256 --batches 1,8 --contexts 131072 \
  --no-flex --json $OUT/cold.json
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran|SUMMARY'
step shapes 300 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d256_kv1_g8_p64_bf16*:*d128_kv8_g4_p64_bf16*:*d64_kv2_g1_p64_bf16*:*d64_kv1_g16_p16_bf16*:*d128_kv2_g7_p64_bf16*'
step memcheck 70 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv1_g8_p16_bf16*'
tar czf $O/run5.tar.gz -C /tmp/o5 .
