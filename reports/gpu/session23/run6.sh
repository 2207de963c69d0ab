#!/usr/bin/env bash
# Session 23, sixth GPU call (the last of its time): score_sketch reads the
# page table's entry beside the length (the branch tests it, so the load
# stays ahead of it), and the count's last block keeps its 16 bins in
# registers for the threshold walk. Token top-k against float64 on the
# short and the prefilter caches; Nsight Compute kernel times against the
# library of commit f0300fc (run 3's kernels, .carry/prevlib.tar.xz) in the
# same call, 28/4/128, 128K, batches 1 and 8.
set -u
source bench/gpu_env.sh
mkdir -p .carry/prev && tar xJf .carry/prevlib.tar.xz -C .carry/prev
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step topk 80 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.ShortCaches:GPUAttentionTokenTopK.PrefilterCaches'
KERNELS='regex:model_layer0_(score_sketch|select_topk_(count|compact))'
STEP_FILTER='^"ID"|score_sketch' step ncu_new 45 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
CONDENSATE_CACHE_DIR=/tmp/condensate-cache-prev STEP_FILTER='^"ID"|score_sketch' \
  step ncu_prev 45 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/prev/oldlib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
echo "=== done $(date +%T)"
