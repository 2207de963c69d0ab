#!/usr/bin/env bash
# Session 20, third GPU call: the sketch step with the selection prefilter,
# cold in L2 (bench_cold.py, two shapes, batch 1 and 8), and its kernels
# one by one (Nsight Compute, caches flushed) at 128K, batch 1.
set -u
source bench/gpu_env.sh
STEP_FILTER='' step cold 300 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 16384,131072,1048576
KERNELS='regex:_(select_topk|score_sketch|sparse_attend|merge)'
STEP_FILTER='select_topk|score_sketch' step ncu 150 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1 --contexts 131072 --iters 1 --max-layers 2
echo "=== done $(date +%T)"
