#!/usr/bin/env bash
# Session 22, sixth GPU call: precertify's and certify's f64 mass sums
# reduced over each warp before one shared-memory atomic a warp (they were
# 256 contended atomics a head; run5/ found both kernels stalled on shared
# memory). The certificate against the CPU's, two certified attention
# shapes, racecheck on the smallest certified shape, the kernels' times
# (Nsight Compute, caches flushed) and the cold certified column.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|certificate|Failure'
step tests 150 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:*d128_kv8_g4_p64_bf16*:*d128_kv2_g7_p64_bf16*'
STEP_FILTER='RACECHECK SUMMARY|PASSED|FAILED' step racecheck 150 \
  compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d64_kv2_g1_p64_bf16*'
STEP_FILTER='model_layer2_(precertify|certify)' step ncu 100 \
  ncu --clock-control none --cache-control all \
  -k 'regex:model_layer2_(precertify|certify)' --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
STEP_FILTER='^\|' step cold 100 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 131072
echo "=== done $(date +%T)"
