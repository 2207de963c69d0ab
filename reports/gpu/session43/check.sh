#!/usr/bin/env bash
# Session 43, call 1: main's GPU correctness after session 42 (the
# certificate walk re-landed, CPU-only changes since): the GPU attention
# suite (GPUAttentionLarge apart), the GPU decoder tests without a model
# (the model-backed ones skip), then GPUAttentionLarge with what is left.
# Carry [".carry/gpu.tar.xz"] (bench/pack_gpu.sh on main).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-570}
source bench/gpu_env.sh
nvidia-smi -L
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|SKIPPED|tests ran'
step attention 420 $BIN/GPUAttentionTest --gtest_filter='-GPUAttentionLarge.*'
step decoder 60 $BIN/GPUDecoderTest
step large 120 $BIN/GPUAttentionTest --gtest_filter='GPUAttentionLarge.*'
tar czf $O/check.tar.gz -C /tmp/o .
