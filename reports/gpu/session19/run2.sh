#!/usr/bin/env bash
# Session 19, second GPU call: the GPUAttention shape run1 ran out of time
# for, then condensate-tune (bench/gpu_session.sh step tune) on real-model
# shapes, dense on seven and block top-k ~1K on two, tuned for batch 1
# and 8 at 16K and 128K.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]'
step attention-d80 90 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='*d80_kv2_g4_p64_f32*'
export OUT
TUNE_SECONDS=50 TUNE_POLICIES=dense STEPS=tune bash bench/gpu_session.sh
TUNE_SECONDS=50 TUNE_POLICIES=block TUNE_SHAPES="32/8/128 8/1/256" \
  STEPS=tune bash bench/gpu_session.sh
echo "=== done $(date +%T)"
