#!/usr/bin/env bash
# Session 18, second GPU call: the group-7 and group-16 shapes against the
# float64 reference, then the cold-L2 sweep of seven real-model shapes
# (docs/BENCHMARKS-HISTORY.md) with the tensor-core attention body.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]|passes'
step attention2 150 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*'
STEP_FILTER='' step cold 400 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json"
echo "=== done $(date +%T)"
