#!/usr/bin/env bash
# Session 34, GPU call 1: this build's checks and the A/B of programmatic
# dependent launch. The merge now runs 4-16 warps a row (Merge.cpp) and
# every sm_90 kernel waits at entry (griddepcontrol) with programmatic
# launches (runtime/cuda/Launch.cpp): GPU tests against float64 (attention
# shapes incl. 256-512 dense splits, certificate, append, large contexts),
# racecheck and memcheck of the 16-warp merge, then bench_cold.py with
# CONDENSATE_GRID_DEPENDENCY=0 and =1 alternating on the same machine.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
STEP_FILTER='PASSED|FAILED|Failure|tests ran|SUMMARY|rror'
step driver 40 $BIN/CondensateCudaDriverTest --gtest_brief=1
step compiler 40 $BIN/GPUCompilerTest --gtest_brief=1
step shapes 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='Shapes/*:GPUCertificate.*:GPUAppend.*'
step large 100 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionLarge.*'
step racecheck 80 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv1_g8_p16_bf16*'
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
ARGS="--shapes 32/8/128,16/2/128,28/4/128 --batches 1 --contexts 32768,131072 --no-flex"
for run in 1-0 1-1 2-0 2-1; do
  gd=${run#*-}
  STEP_FILTER='^\|' CONDENSATE_GRID_DEPENDENCY=$gd step ab$run 60 \
    python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
    --json $OUT/ab$run.json $ARGS
done
echo "=== done $(date +%T)"
