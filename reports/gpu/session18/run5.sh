#!/usr/bin/env bash
# Session 18, fifth GPU call: the merge as one block of 4 warps per row
# (the warps walk the live splits in turn and combine through shared
# memory) and dense splits past 128 only for chunks of 1024 tokens or
# more. The certificate suite (every merge input: sparse, dense fallback,
# value boxes, stats) and a tensor-core shape against the float64
# reference, then the cold sweep of three shapes at batch 1 and 8.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]|passes'
step attention5 90 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:*d128_kv2_g7_p64_bf16*'
STEP_FILTER='' step cold 80 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 16/2/128,8/1/256,32/8/128 --batches 1,8
echo "=== done $(date +%T)"
