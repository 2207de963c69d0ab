#!/usr/bin/env bash
# Session 21, first GPU call: what session 20 left unrun on the GPU (certify's
# value box at head_dim 512 with 1000 extras, the certificate comparison,
# memcheck), and why score_sketch takes 53 us at 128K (Nsight Compute
# sections: throughput, warp stalls, occupancy).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|OK \]|ERROR SUMMARY|certificate'
step tests 240 $BIN/GPUAttentionTest --gtest_brief=0 \
  --gtest_filter='GPUCertificate.*:*d512*:GPUAttentionTokenTopK.*:*d128_kv2_g7_p64_bf16*'
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d512*'
STEP_FILTER='score_sketch|Duration|Throughput|Issue|Occupancy|Registers|Stall|stall|Eligible|Warp Cycles|Executed Ipc|Block Size|Grid Size|Shared' \
step ncu 150 ncu --clock-control none --cache-control all -k 'regex:_score_sketch$' \
  -c 2 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/128 --batches 1 --contexts 131072 --iters 1 --max-layers 1
echo "=== done $(date +%T)"
