#!/usr/bin/env bash
# Session 22, fourth GPU call: where the certified step's time goes when it
# falls back (page bounds, tau 1e-3, 4 extras; 100% fallback on random
# keys): Nsight Compute times of every kernel of the certified layer
# (model_layer2_*) and of dense attention (model_layer0_*), caches flushed
# before each, at 128K, batch 1 and 8, on 28/4/128 and 32/8/128.
set -u
source bench/gpu_env.sh
STEP_FILTER='model_layer' step ncu 200 \
  ncu --clock-control none --cache-control all \
  -k 'regex:model_layer(0|2)_' --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
echo "=== done $(date +%T)"
