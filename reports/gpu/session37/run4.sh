#!/usr/bin/env bash
# Session 39, GPU call 3 (run as one line): the GPUAttentionTest cases
# run3.sh's test step had no time left for.
set -u
O=$OUT
export OUT=/tmp/o4
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran'
step tests 540 $BIN/GPUAttentionTest --gtest_filter='*d64_kv1_g16*:*d128_kv2_g7*:*d96*:*d80*:*d512*:*GPUAppend*:*GPUTuner*'
tar czf $O/run4.tar.gz -C /tmp/o4 .
