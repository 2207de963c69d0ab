#!/usr/bin/env bash
# Session 23, first GPU call: what session 22 left unchecked on the H200
# (its last build, HEAD 10bb739): the certified attention shapes whose
# sketch layers now take 4 bits and so the tensor-core score_sketch
# (d128_kv8_g4_p64, d128_kv2_g7_p64), one under memcheck; memcheck and
# racecheck on the short-cache token top-k (groups 4 and 7); memcheck on
# the certificate after its warp-reduced atomics. Then Nsight Compute
# sections (speed of light, warp states, occupancy) for the sketch step's
# score_sketch, count and compact at 28/4/128, 128K, B8, to choose what to
# rework.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step tests 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv8_g4_p64_bf16*:*d128_kv2_g7_p64_bf16*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Failure|hazard'
step memcheck_g7 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv2_g7_p64_bf16*'
step memcheck_short 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
step racecheck_short 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
step memcheck_cert 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
STEP_FILTER='Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|model_layer0' \
  step ncu 150 ncu --clock-control none --cache-control all \
  -k 'regex:model_layer0_(score_sketch|select.*(count|compact))' \
  --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 8 --contexts 131072 --iters 1 --max-layers 1
echo "=== done $(date +%T)"
