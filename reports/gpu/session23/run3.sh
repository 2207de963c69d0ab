#!/usr/bin/env bash
# Session 23, third GPU call (the rest of the session's GPU time): the
# selection prefilter reworked (the count kernel's last block per sequence
# and kv head finds the threshold bin once; compaction reads it and places
# its kept units by one warp's scan), on top of run2's score_sketch.
# Token top-k against float64 through the prefilter (UncertifiedBudgets:
# groups 1, 3, 4, 7, up to 70001 tokens), memcheck and racecheck on the
# small prefilter case; then Nsight Compute kernel times (caches flushed
# before each) of score_sketch, count and compact, this build against
# session 22's library (HEAD 10bb739, .carry/oldlib.tar.xz), and the new
# build's cold sketch step (bench_cold), 128K, batches 1 and 8.
set -u
source bench/gpu_env.sh
mkdir -p .carry/old && tar xJf .carry/oldlib.tar.xz -C .carry/old
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step topk 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.UncertifiedBudgets:GPUAttentionTokenTopK.PrefilterCaches'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Failure|hazard'
step memcheck 70 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.PrefilterCaches'
step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.PrefilterCaches'
SHAPES=28/4/128,32/8/128
KERNELS='regex:model_layer0_(score_sketch|select_topk_(count|compact))'
STEP_FILTER='^"ID"|score_sketch' step ncu_new 70 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes $SHAPES --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
CONDENSATE_CACHE_DIR=/tmp/condensate-cache-old STEP_FILTER='^"ID"|score_sketch' \
  step ncu_old 70 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/old/oldlib/libCondensateCompiler.so \
  --shapes $SHAPES --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
STEP_FILTER='^\|' step cold_new 100 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold_new.json" \
  --shapes $SHAPES --batches 1,8 --contexts 131072
echo "=== done $(date +%T)"
