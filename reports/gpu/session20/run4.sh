#!/usr/bin/env bash
# Session 20, fourth GPU call: four of the GPUAttention shapes (selection
# below the prefilter's length: the ranking block's unfiltered branch),
# then what the certified step's precertify and certify kernels wait on
# (Nsight Compute sections, 28/4/128 at 128K, batch 1).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]'
step shapes 200 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='*d64_kv1_g16_p16_bf16*:*d128_kv2_g7_p64_bf16*:*d256_kv2_g2_p16_bf16*:*d96_kv4_g3_p16_bf16*'
STEP_FILTER='precertify|certify|Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Memory Throughput|Compute \(SM\)|Issue Slots|No Eligible|Warp Cycles Per Issued|Stall' \
  step ncu 150 ncu --clock-control none --cache-control all \
  -k 'regex:_(precertify|certify)$' -c 2 \
  --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SchedulerStats \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1 --contexts 131072 --iters 1 --max-layers 2
echo "=== done $(date +%T)"
