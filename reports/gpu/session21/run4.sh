#!/usr/bin/env bash
# Session 21, fourth and fifth GPU calls (run4/, run5/): the tensor-core score_sketch with the next
# k-step's rows loaded before the current step's arithmetic (run3: 55 us at
# 128K on 28/4/128, no faster than the CUDA-core kernel: latency-bound).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|OK \]' step tests 120 $BIN/GPUAttentionTest \
  --gtest_brief=0 --gtest_filter='GPUAttentionTokenTopK.*:GPUCertificate.*'
STEP_FILTER='^\|' step cold 200 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --json "$OUT/cold.json" \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 131072
STEP_FILTER='score_sketch' step ncu 120 ncu --clock-control none \
  --cache-control all -k 'regex:_score_sketch$' --metrics gpu__time_duration.sum,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1 --contexts 131072 --iters 1 --max-layers 1
echo "=== done $(date +%T)"
