#!/usr/bin/env bash
# Session 22, fifth GPU call: Nsight Compute sections (speed of light,
# scheduler, warp states, source counters of the hottest stalls) of the
# certified layer's precertify_low and certify at 128K, batch 1, 28/4/128:
# the two kernels that make the fallback cost 2.6x dense (run4/).
set -u
source bench/gpu_env.sh
step ncu 240 ncu --clock-control none --cache-control all \
  -k 'regex:model_layer2_(precertify_low|certify)$' -c 2 \
  --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
  --section LaunchStats --section Occupancy \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1 --contexts 131072 --iters 1 --max-layers 1
echo "=== done $(date +%T)"
