#!/usr/bin/env bash
# Session 36, GPU call 1: the tensor-core attention body at head_dim 256
# (Gemma-class 8/1/256; by default with a cp.async ring of 2, the lane
# groups of CUDA cores with attend_stages 1): the d256 attention shapes
# against float64 (8/1/256 with pages of 64, 4/2/256 with pages of 16),
# Gemma 3's synthetic decoder test, then the cold benchmark of 8/1/256 with
# the ring of 2 (default), of 3, and lane groups (the old default), one
# process each (each with its own SDPA rows); then the shape session 35
# did not reach (d512).
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|SKIPPED|tests ran|rel'
step shapes_d256 200 $BIN/GPUAttentionTest --gtest_filter='*d256*'
step gemma_decoder 60 $BIN/GPUDecoderTest --gtest_filter='*Gemma3Synthetic*'
unset STEP_FILTER
LIB=.carry/run/lib/libCondensateCompiler.so
ARGS="--lib $LIB --shapes 8/1/256 --batches 1,8 --contexts 16384,131072 --no-flex"
step cold_ring2 90 python3 bench/bench_cold.py $ARGS --json $OUT/cold_ring2.json
CONDENSATE_TUNING='{"attend_stages": 1}' step cold_lanes 90 \
  python3 bench/bench_cold.py $ARGS --json $OUT/cold_lanes.json
CONDENSATE_TUNING='{"attend_stages": 3}' step cold_ring3 90 \
  python3 bench/bench_cold.py $ARGS --json $OUT/cold_ring3.json
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran'
step shapes_d512 150 $BIN/GPUAttentionTest --gtest_filter='*d512*'
tar czf $O/run1.tar.gz -C /tmp/o .
