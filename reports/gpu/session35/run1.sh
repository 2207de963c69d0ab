#!/usr/bin/env bash
# Session 35, GPU call 1: the tensor-core attention loop's cp.async ring
# (attend-stages; the lowering's rule: the most stages up to 4 that leave
# two blocks an SM) against the register prefetch of one tile it replaces
# (attend-stages=1, through CONDENSATE_TUNING), cold, alternating A B A B
# in separate processes on one machine (bench_cold.py checks layer 0 of
# every case against SDPA and dense). Then the GPU tests of the bf16
# shapes (the ring by default) and the tuner's test (stages 1-4 each
# checked against float64), memcheck and racecheck of a ring kernel.
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
ARGS="--shapes 32/8/128,28/4/128,32/8/64,14/2/64 --batches 1,8 --contexts 32768,131072 --no-flex"
for run in ring-1 regs-1 ring-2 regs-2; do
  if [ "${run%-*}" = regs ]; then export CONDENSATE_TUNING='{"attend_stages": 1}'
  else unset CONDENSATE_TUNING; fi
  STEP_FILTER='^\||rror' step ab-$run 75 \
    python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
    --json $OUT/ab-$run.json $ARGS
done
unset CONDENSATE_TUNING
STEP_FILTER='PASSED|FAILED|Failure|tests ran|SUMMARY|rror'
step compiler 40 $BIN/GPUCompilerTest --gtest_brief=1
step mma 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='Shapes/*bf16*:GPUTuner.*'
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
step racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
echo "=== done $(date +%T)"
tar czf $O/run1.tar.gz -C /tmp o
