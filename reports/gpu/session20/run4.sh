#!/usr/bin/env bash
# Session 20, fourth GPU call: end to end at 130K tokens with the selection
# prefilter (condensate-bench, dummy bf16 weights of real architectures,
# dense against sketch and block top-1024 and the certified sketch policy
# with 512 extras), then what the certified step's precertify and certify
# kernels wait on (Nsight Compute sections, 28/4/128 at 128K, batch 1).
set -u
source bench/gpu_env.sh
STEPS=e2e E2E_CERTIFIED=1 \
  E2E_RUNS="llama-3.2-1b:130000:8 llama-3-8b:130000:4 qwen2.5-7b:130000:4" \
  bash bench/gpu_session.sh
STEP_FILTER='precertify|certify|Duration|Registers Per|Achieved Occupancy|Block Size|Grid Size|Memory Throughput|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued' \
  step ncu 100 ncu --clock-control none --cache-control all \
  -k 'regex:_(precertify|certify)$' -c 2 \
  --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SchedulerStats \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 1 --contexts 131072 --iters 1 --max-layers 2
echo "=== done $(date +%T)"
