#!/usr/bin/env bash
# Session 20, fifth GPU call: precertify split into three kernels (the pass
# over every unit spread over a grid of chunks) and certify's membership
# bitmap, against the CPU certificate and the float64 reference (two
# GPUAttention shapes with certified layers), memcheck and racecheck, the
# certified column of the cold sweep, and the kernels one by one.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|RACECHECK SUMMARY|certificate'
step cert 200 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*'
step memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
step racecheck 70 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
STEP_FILTER='^\|' step cold 90 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 28/4/128,32/8/128 --batches 1 --contexts 16384,131072
STEP_FILTER='precertify|certify' step ncu 60 ncu --clock-control none \
  --cache-control all -k 'regex:_(precertify|precertify_low|precertify_test|certify)$' \
  -c 8 --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1 --contexts 131072 --iters 1 --max-layers 2
echo "=== done $(date +%T)"
