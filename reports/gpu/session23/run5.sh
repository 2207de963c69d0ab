#!/usr/bin/env bash
# Session 23, fifth GPU call: what limits the reworked score_sketch now
# (Nsight Compute sections at 28/4/128, 128K, batch 8), and the other end
# to end cases of issue 12 with this build: Llama-3-8B at 32768 x 8 and
# Llama-3.2-1B at 130000 x 8 (dummy weights).
set -u
source bench/gpu_env.sh
STEP_FILTER='Duration|Throughput|Registers|Achieved Occupancy|Eligible|Issued Warp|Warp Cycles Per Issued|stalled|Est. Speedup|model_layer0' \
  step ncu_sections 90 ncu --clock-control none --cache-control all \
  -k 'regex:model_layer0_score_sketch' -c 1 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section SchedulerStats --section MemoryWorkloadAnalysis \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128 --batches 8 --contexts 131072 --iters 1 --max-layers 1
STEPS=e2e E2E_RUNS="llama-3-8b:32768:8 llama-3.2-1b:130000:8" bash bench/gpu_session.sh
echo "=== done $(date +%T)"
