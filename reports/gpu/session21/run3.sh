#!/usr/bin/env bash
# Session 21, third GPU call: the cold sweep's sketch column with
# score_sketch on tensor cores (session 20's run3 shapes, plus 32/8/64 and
# 14/2/64 at batch 1), and the sketch step's kernels at 128K.
set -u
source bench/gpu_env.sh
STEP_FILTER='^\|' step cold 330 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 16384,131072,1048576
STEP_FILTER='^\|' step cold64 120 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold64.json" \
  --shapes 32/8/64,14/2/64 --batches 1 --contexts 16384,131072
KERNELS='regex:_(select_topk.*|score_sketch|sparse_attend|merge)$'
STEP_FILTER='select_topk|score_sketch' step ncu 120 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1 --contexts 131072 --iters 1 --max-layers 2
echo "=== done $(date +%T)"
