#!/usr/bin/env bash
# Session 43, call 2: the GPU attention suite's shapes that call 1's
# 420 s step did not reach (d128_kv1_g8_p16_bf16 onwards), in four gtest
# shards run side by side (each its own JIT cache), then memcheck and
# racecheck on two of them. Carry [".carry/gpu.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-570}
source bench/gpu_env.sh
nvidia-smi -L
F='Shapes/GPUAttention.*:-*d128_kv8_g4_p64_bf16:*d128_kv8_g4_p16_f16:*d64_kv3_g3_p16_f32:*d64_kv2_g1_p64_bf16'
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i CONDENSATE_CACHE_DIR=/tmp/cache$i \
    timeout 400 $BIN/GPUAttentionTest --gtest_filter="$F" > $OUT/shard$i.log 2>&1 &
done
wait
grep -hE '^\[       OK|FAILED|Failure|PASSED|tests ran' $OUT/shard*.log
STEP_FILTER='FAILED|Failure|PASSED|tests ran|ERROR SUMMARY|RACECHECK SUMMARY'
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 $BIN/GPUAttentionTest --gtest_filter='*d64_kv1_g16_p16_bf16'
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 $BIN/GPUAttentionTest --gtest_filter='*d96_kv4_g3_p16_bf16'
tar czf $O/shapes.tar.gz -C /tmp/o .
