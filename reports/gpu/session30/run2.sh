#!/usr/bin/env bash
# Session 30, second GPU call: what run1 (session 26's run4.sh) cut off
# (the tuner test), then the compiler, AOT, C example and decoder tests
# (the decoder tests that need a real model skip: none is carried).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|skip'
step tuner 150 $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUTuner.*'
STEPS="compiler aot cexample decoder" bash bench/gpu_session.sh 2>&1 | grep -vE '^$'
echo "=== done $(date +%T)"
