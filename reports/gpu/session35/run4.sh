#!/usr/bin/env bash
# Session 35, GPU call 4: the attention shapes run 2's time limit stopped
# before (default knobs, this build), each against float64.
set -u
source bench/gpu_env.sh > /dev/null
timeout ${LIMIT:-280} $BIN/GPUAttentionTest \
  --gtest_filter='*d256_kv2_g2_p16_bf16*:*d64_kv4_g2_p64_f16*:*d64_kv1_g16_p16_bf16*:*d128_kv2_g7_p64_bf16*:*d96_kv4_g3_p16_bf16*:*d80_kv2_g4_p64_f32*:*d512_kv1_g2_p16_bf16*' \
  > $OUT/shapes2.log 2>&1
echo "rc=$?"
grep -E "^\[       OK|FAILED|Failure|PASSED|tests ran" $OUT/shapes2.log | cut -c1-140
