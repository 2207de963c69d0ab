#!/usr/bin/env bash
# Session 16, third GPU call: every shape of GPUAttention (GQA groups 1-8,
# sketch and exact top-k uncertified and certified layers) and the
# certificate's CPU = GPU check against float64, then end to end at Qwen2.5-7B's
# shape (group 7: where one score row per kv head saves the most).
set -u
source bench/gpu_env.sh
STEP_FILTER='OK|PASSED|FAILED|ERROR SUMMARY|^(dense|policy)|sketch certificate|^certificate'
step attention 300 $BIN/GPUAttentionTest \
  --gtest_filter='Shapes/GPUAttention.*:GPUCertificate.*'
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
step e2e-qwen2.5-7b-32768-b8 110 $BIN/condensate-bench --dummy qwen2.5-7b --context 32768 \
  --batch 8 --steps 32 --warmup 4 --policy "$sk" --policy "$bm" \
  --json $OUT/e2e-qwen2.5-7b-32768-b8.json
echo "=== done $(date +%T)"
