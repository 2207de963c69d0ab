#!/usr/bin/env bash
# Session 22, second GPU call: the new score_sketch (rule still open to
# groups 2-8) under compute-sanitizer (memcheck, racecheck: the per-warp
# terms in shared memory) on short caches; Nsight Compute times of every
# kernel of the sketch step (caches flushed before each); the cold sketch
# column at groups 2 and 3 (16/8/128, 24/8/128) with this build and with
# session 21's library; then the full token top-k test.
set -u
source bench/gpu_env.sh
mkdir -p .carry/old && tar xJf .carry/oldlib.tar.xz -C .carry/old
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|RACECHECK SUMMARY|Failure|hazard'
step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.ShortCaches'
STEP_FILTER='^"|sketch_' step ncu 150 ncu --clock-control none \
  --cache-control all -k 'regex:^sketch_' --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
SHAPES=16/8/128,24/8/128
STEP_FILTER='^\|' step cold_new 100 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold_new.json" \
  --shapes $SHAPES --batches 1,8 --contexts 131072
CONDENSATE_CACHE_DIR=/tmp/condensate-cache-old STEP_FILTER='^\|' \
  step cold_old 100 python3 bench/bench_cold.py \
  --lib .carry/old/oldlib/libCondensateCompiler.so --json "$OUT/cold_old.json" \
  --shapes $SHAPES --batches 1,8 --contexts 131072
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|Failure'
step topk 200 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUAttentionTokenTopK.UncertifiedBudgets'
echo "=== done $(date +%T)"
