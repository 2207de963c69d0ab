#!/usr/bin/env bash
# Session 33, GPU call 2: the attention loops' prefetch kept (opaque rows,
# Attend.cpp): this build timed cold as run2a.sh timed main's, on the same
# machine; FlexAttention's first run at two cases; then the attention
# shapes and the certificate against float64, and racecheck.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
ARGS="--shapes 32/8/128,28/4/128,32/8/64,8/1/256 --batches 1,8 --contexts 32768,131072"
STEP_FILTER='^\|' CONDENSATE_CACHE_DIR=/tmp/cache-new step cold-new 200 \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --json $OUT/cold-new.json $ARGS --flex-cases 1:131072,8:32768
STEP_FILTER='PASSED|FAILED|tests ran' CONDENSATE_CACHE_DIR=/tmp/cache-new step shapes 180 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='Shapes/*:GPUCertificate.*'
STEP_FILTER='SUMMARY|PASSED|FAILED' CONDENSATE_CACHE_DIR=/tmp/cache-new step racecheck 80 \
  compute-sanitizer --tool racecheck --error-exitcode 9 $BIN/GPUAttentionTest \
  --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*:*d256_kv2_g2*'
echo "=== done $(date +%T)"
