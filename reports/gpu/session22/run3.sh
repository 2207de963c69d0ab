#!/usr/bin/env bash
# Session 22, third GPU call: the final rule (tensor cores for groups of 4
# to 8; 4 with half columns). Token top-k on short caches; Nsight Compute
# times of the sketch step's kernels (caches flushed before each) at
# 28/4/128 and 32/8/128; the cold sketch column at 128K on six real-model
# shapes; end to end on the dummy Qwen2.5-7B and Llama-3-8B at 130000 x 4.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|Failure'
step topk 90 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
STEP_FILTER='model_layer0_(score_sketch|select|sparse|merge)' step ncu 150 \
  ncu --clock-control none --cache-control all \
  -k 'regex:model_layer0_(score_sketch|select|sparse_attend|merge)' \
  --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
STEP_FILTER='^\|' step cold 200 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 32/8/128,64/8/128,28/4/128,16/2/128,32/8/64,14/2/64 \
  --batches 1 --contexts 131072
STEPS=e2e E2E_RUNS="qwen2.5-7b:130000:4 llama-3-8b:130000:4" \
  bash bench/gpu_session.sh
echo "=== done $(date +%T)"
