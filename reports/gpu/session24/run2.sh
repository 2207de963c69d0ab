#!/usr/bin/env bash
# Session 24, second GPU call: (1) the prefilter's count kernel takes 4
# chunks a block (its 4096-bin histogram cleared, flushed and fenced once
# for 8192 units instead of 2048); (2) the decoder's glue: rmsnorm and the
# activations write the bf16 rows the next projection reads (no
# round_bf16 launch), split_qkv and both ropes are one kernel (split_rope).
# Checks: token top-k against float64 through the prefilter, memcheck on
# the small prefilter case, the GPU decoder tests (f32 against the float64
# reference and the CPU decoder, bf16 weights, Gemma 3's path, batched,
# sparse). Then Nsight Compute times of count/compact, this build against
# HEAD 12cf8bb's library (.carry/oldlib.tar.xz), and end to end on dummy
# weights: Llama-3.2-1B 130000 x 8 and Llama-3-8B 130000 x 4.
set -u
source bench/gpu_env.sh
mkdir -p .carry/old && tar xJf .carry/oldlib.tar.xz -C .carry/old
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step topk 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.*'
step decoder 200 $BIN/GPUDecoderTest --gtest_brief=1
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure'
step memcheck 70 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.PrefilterCaches'
SHAPES=28/4/128,32/8/64
KERNELS='regex:model_layer0_(select_topk_(count|compact))'
STEP_FILTER='^"ID"|select' step ncu_new 90 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes $SHAPES --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
CONDENSATE_CACHE_DIR=/tmp/condensate-cache-old STEP_FILTER='^"ID"|select' \
  step ncu_old 90 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/old/oldlib/libCondensateCompiler.so \
  --shapes $SHAPES --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
STEPS=e2e E2E_RUNS="llama-3.2-1b:130000:8 llama-3-8b:130000:4" bash bench/gpu_session.sh
echo "=== done $(date +%T)"
