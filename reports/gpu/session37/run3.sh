#!/usr/bin/env bash
# Session 39, GPU call 2 (after run1.sh, whose test step ran out of time
# after token top-k and the certificate had passed): every other
# GPUAttentionTest case (the 13 shapes, append, tuner, the large case),
# then racecheck of 8/1/256 (3 warps sharing a block's ring).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-575}
source bench/gpu_env.sh
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|tests ran|batch'
step tests 380 $BIN/GPUAttentionTest --gtest_filter='-*TokenTopK*:*GPUCertificate*'
STEP_FILTER='PASSED|FAILED|Failure|tests ran|SUMMARY|rror'
step racecheck_d256 180 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d256_kv1_g8_p64_bf16*'
tar czf $O/run3.tar.gz -C /tmp/o .
