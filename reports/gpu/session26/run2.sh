#!/usr/bin/env bash
# Session 26, second GPU call: the whole token top-k suite against float64
# (GPUAttentionTokenTopK.*; session 24 never saw it finish within 200 s on
# a fresh machine, compiling every kernel), then condensate-tune on the
# 4-bit sketch top-1024 policy of three real-model shapes (Qwen2.5-7B
# 28/4/128, Llama-3-8B 32/8/128, Llama-3.2-1B 32/8/64) at 128K, batch 1
# and 8: does the sketch-occupancy knob (16 or 24 resident warps a SM
# against the default 32) win?
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step topk 330 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.*'
STEPS=tune TUNE_SHAPES="32/8/64 28/4/128 32/8/128" TUNE_POLICIES=sketch \
  TUNE_CONTEXTS=131072 TUNE_SECONDS=80 bash bench/gpu_session.sh
grep -E "^###|^knobs|sketch-occupancy=(0|16|24)" "$OUT/tune.log" | head -60
echo "=== done $(date +%T)"
