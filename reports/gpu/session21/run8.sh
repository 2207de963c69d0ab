#!/usr/bin/env bash
# Session 21, eighth GPU call: after the review (the tensor-core
# score_sketch sums and maxes over a head's four lanes with laneSum and
# laneMax, xor 2 then 1), the group-7 attention shape, whose sketch layers
# (top-k alone and certified) take the tensor-core kernel.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]' step tests 150 $BIN/GPUAttentionTest \
  --gtest_brief=0 --gtest_filter='*d128_kv2_g7_p64_bf16*'
echo "=== done $(date +%T)"
