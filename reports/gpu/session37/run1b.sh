#!/usr/bin/env bash
# Session 38's short form of run1.sh for a call with little device time
# left: the GPU tests of the changed kernels first, then the cold A/B
# against fd1a1d0's compiler on the two shapes that decide (32/8/128 and
# 8/1/256, batch 1 and 8, 128K).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-330}
source bench/gpu_env.sh
mkdir -p .carry/base && tar xJf .carry/base.tar.xz -C .carry/base
NEW=.carry/run/lib/libCondensateCompiler.so
BASE=.carry/base/lib/libCondensateCompiler.so
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran|batch'
step tests 140 $BIN/GPUAttentionTest --gtest_filter='*GPUAttentionLarge*:*d256_kv1_g8_p64*:*d128_kv8_g4_p64*:*d64_kv2_g1_p64*:*TokenTopK*:*GPUCertificate*'
unset STEP_FILTER
ARGS="--shapes 32/8/128,8/1/256 --batches 1,8 --contexts 131072 --no-flex"
step cold_new 90 python3 bench/bench_cold.py --lib $NEW $ARGS --json $OUT/cold_new.json
CONDENSATE_CACHE_DIR=/tmp/cache-base step cold_base 90 python3 bench/bench_cold.py --lib $BASE $ARGS --json $OUT/cold_base.json
tar czf $O/run1b.tar.gz -C /tmp/o .
