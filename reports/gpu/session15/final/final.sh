#!/usr/bin/env bash
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|^(dense|policy)|sketch certificate|^certificate'
step attention 230 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.*:GPUCertificate.*:*d128_kv8_g4_p64_bf16*:*d64_kv2_g1_p64_bf16*:*d96_kv4_g3_p16_bf16*:*d128_kv1_g8_p16_bf16*'
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
for run in llama-3.2-1b llama-3-8b; do
  step e2e-$run-32768-b8 100 $BIN/condensate-bench --dummy $run --context 32768 --batch 8 \
    --steps 32 --warmup 4 --policy "$sk" --policy "$bm" --json $OUT/e2e-$run-32768-b8.json
done
step memcheck 80 compute-sanitizer --tool memcheck --error-exitcode 9 $BIN/GPUAttentionTest \
  --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
step racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 $BIN/GPUAttentionTest \
  --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
echo "=== done $(date +%T)"
