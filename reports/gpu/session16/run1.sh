#!/usr/bin/env bash
# Session 16, first GPU call: the GQA shapes' and token top-k GPU tests
# (incl. the two-pass group max), then end-to-end decode at 32K x 8 and
# 128K (dummy weights; dense, sketch top-1024, block_minmax top-1024), then
# memcheck and racecheck of a GQA shape whose schedule has uncertified
# sketch and exact top-k layers.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|^(dense|policy)|sketch certificate|^certificate|passes'
step attention 180 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.*:GPUCertificate.*:*d128_kv8_g4_p64_bf16*:*d96_kv4_g3_p16_bf16*:*d128_kv1_g8_p16_bf16*'
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
for run in llama-3.2-1b:32768:8 llama-3-8b:32768:8 llama-3.2-1b:130000:8; do
  IFS=: read -r arch ctx batch <<< "$run"
  step e2e-$arch-$ctx-b$batch 100 $BIN/condensate-bench --dummy $arch --context $ctx \
    --batch $batch --steps 32 --warmup 4 --policy "$sk" --policy "$bm" \
    --json $OUT/e2e-$arch-$ctx-b$batch.json
done
for tool in memcheck racecheck; do
  step $tool 60 compute-sanitizer --tool $tool --error-exitcode 9 $BIN/GPUAttentionTest \
    --gtest_brief=1 --gtest_filter='*d96_kv4_g3_p16_bf16*'
done
echo "=== done $(date +%T)"
