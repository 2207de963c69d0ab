#!/usr/bin/env bash
# Session 37, GPU call 2: the kernels of run 1 (sparse splits by batch,
# the certificate's split walk by rounds, head_dim 256's warps by shared
# memory) against float64: the tensor-core shapes (d256 with 3 warps a
# block), token top-k, the certificate (CPU and GPU decisions), the large
# case (64 sequences of 8 kv heads: one split launched of up to 33, the
# rest marked empty by split 0's block; 128K tokens); memcheck of 32/8/128
# and racecheck of 8/1/256 (3 warps sharing a block's ring).
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran|batch'
step shapes 200 $BIN/GPUAttentionTest --gtest_filter='*d256*:*d128_kv8_g4_p64*:*d64_kv2_g1_p64*:*d128_kv2_g7*:*d64_kv1_g16*:*d512*'
step sparse 200 $BIN/GPUAttentionTest --gtest_filter='*TokenTopK*:*GPUCertificate*:*GPUAttentionLarge*'
STEP_FILTER='PASSED|FAILED|Failure|tests ran|SUMMARY|rror'
step memcheck_d128 70 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
step racecheck_d256 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d256_kv1_g8_p64_bf16*'
tar czf $O/run2.tar.gz -C /tmp/o .
