#!/usr/bin/env bash
# Session 22, first GPU call: score_sketch on tensor cores with the page's
# per-channel terms once per warp in shared memory, one lop3 per code pair,
# and half columns for groups of 4 or less (the rule opened to groups 2-8
# for this measurement). Token top-k against the float64 reference (groups
# 1, 3, 4, 7), then the cold sweep's sketch column with this build (new)
# and with session 21's library (old, .carry/oldlib.tar.xz) in turn, then
# the certificate and two attention shapes.
set -u
source bench/gpu_env.sh
mkdir -p .carry/old && tar xJf .carry/oldlib.tar.xz -C .carry/old
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|certificate|Failure|error'
step topk 150 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionTokenTopK.*'
SHAPES=28/4/128,32/8/128,16/8/128
STEP_FILTER='^\|' step cold_new 170 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold_new.json" \
  --shapes $SHAPES --batches 1,8 --contexts 131072
CONDENSATE_CACHE_DIR=/tmp/condensate-cache-old STEP_FILTER='^\|' \
  step cold_old 170 python3 bench/bench_cold.py \
  --lib .carry/old/oldlib/libCondensateCompiler.so --json "$OUT/cold_old.json" \
  --shapes $SHAPES --batches 1,8 --contexts 131072
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|certificate|Failure'
step tests 100 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:*d128_kv8_g4_p64_bf16*'
echo "=== done $(date +%T)"
