#!/usr/bin/env bash
# Session 36, GPU call 2: the final build's checks: GPUCompilerTest (the
# tuner's search now tries attend_stages 1), compute-sanitizer memcheck and
# racecheck of the head_dim-256 ring (Gemma-class 8/1/256, the new rule)
# and of the default kernels at head_dim 128 and 64, then the Python
# package's tests (GPU ones included) for what time is left.
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|Failure|tests ran|SUMMARY|rror'
step compiler 40 $BIN/GPUCompilerTest --gtest_brief=1
step memcheck_d256 80 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d256_kv1_g8_p64_bf16*'
step racecheck_d256 80 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d256_kv1_g8_p64_bf16*'
step memcheck_d128 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
step racecheck_d64 60 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
rm -rf python/src/condensate/prebuilt
cp -r .carry/run/prebuilt python/src/condensate/prebuilt
STEP_FILTER='passed|failed|skipped|rror'
CONDENSATE_LIBRARY_DIR=$PWD/.carry/run/lib PYTHONPATH=$PWD/python/src \
  step python 200 python3 -m pytest -q -rs -p no:cacheprovider python/tests
tar czf $O/run2.tar.gz -C /tmp/o .
