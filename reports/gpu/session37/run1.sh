#!/usr/bin/env bash
# Session 37, GPU call 1 (written in session 37, run in session 39):
# sparse attention launches the splits its batch
# needs (about 256 blocks: ceil(256 / (batch x kv heads)) of up to
# ceil(slots / 32), where it ran ceil(slots / 128) at every batch), the
# certificate's split walk 8 splits a round, and head_dim 256's warps a
# block chosen by shared memory (3 at 8/1/256). A/B in separate processes
# against main's fd1a1d0 compiler (.carry/base.tar.xz: that build's
# libCondensateCompiler.so, stripped, under lib/), cold; then against
# float64: the tensor-core shapes, the certificate (CPU and GPU
# decisions) and the large case (64 sequences of 8 kv heads: one split
# launched of up to 33, the rest marked empty by split 0's block; 128K
# tokens); memcheck of 32/8/128; B32/32K timings if time is left.
# The bench's layer-0 check (each sparse output against dense) covers the
# splits not launched at batch 8: compare *_vs_dense_rel_diff with base's.
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
mkdir -p .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
NEW=.carry/run/lib/libCondensateCompiler.so
BASE=.carry/base/lib/libCondensateCompiler.so
ARGS="--shapes 32/8/128,14/2/64,8/1/256 --batches 1,8 --contexts 131072 --no-flex"
step cold_new 130 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new.json
CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base 130 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base.json
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran|batch'
step tests 170 $BIN/GPUAttentionTest --gtest_filter='*GPUAttentionLarge*:*d256*:*d128_kv8_g4_p64*:*d64_kv2_g1_p64*:*d128_kv2_g7*:*TokenTopK*:*GPUCertificate*'
STEP_FILTER='PASSED|FAILED|Failure|tests ran|SUMMARY|rror'
step memcheck_d128 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
unset STEP_FILTER
ARGS32="--shapes 32/8/128 --batches 32 --contexts 32768 --no-flex"
step cold32_new 60 python3 bench/bench_cold.py --lib $NEW $ARGS32 --json $OUT/cold32_new.json
CONDENSATE_CACHE_DIR=/tmp/cache-base step cold32_base 60 python3 bench/bench_cold.py --lib $BASE $ARGS32 --json $OUT/cold32_base.json
tar czf $O/run1.tar.gz -C /tmp/o .
