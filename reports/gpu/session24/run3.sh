#!/usr/bin/env bash
# Session 24, third GPU call: the count kernel now takes its chunks a block
# from the launch (k = min(4, ceil(chunks hkv B / 768)): 1 for one
# sequence, where run 2's fixed 4 was slower), and split_rope also adds
# Qwen2's q/k/v bias (no add_bias launch). Checks: token top-k against
# float64 (all GPUAttentionTokenTopK cases), the GPU decoder tests (the
# bf16 test now also runs a qwen2 model with biases), memcheck on the small
# prefilter case; count/compact kernel times (Nsight Compute); then end to
# end on dummy weights, HEAD 12cf8bb's condensate-bench (the decoder's
# glue before this session; .carry/oldbench.tar.xz) against this build's,
# both over this build's libraries (so the attention kernels are the same
# and only the glue differs), in the same call: Llama-3.2-1B 130000 x 8 and
# Qwen2.5-7B 130000 x 4.
set -u
source bench/gpu_env.sh
mkdir -p .carry/oldb && tar xJf .carry/oldbench.tar.xz -C .carry/oldb
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure'
step topk 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUAttentionTokenTopK.*'
step decoder 120 $BIN/GPUDecoderTest --gtest_brief=1
grep -E "bf16 against" "$OUT/decoder.log"
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure'
step memcheck 70 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUAttentionTokenTopK.PrefilterCaches'
KERNELS='regex:model_layer0_(select_topk_(count|compact))'
STEP_FILTER='select' step ncu_new 90 ncu --clock-control none \
  --cache-control all -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
  python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
  --shapes 28/4/128,32/8/64 --batches 1,8 --contexts 131072 --iters 1 --max-layers 1
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
STEP_FILTER='^(dense|policy)'
for run in llama-3.2-1b:130000:8 qwen2.5-7b:130000:4; do
  IFS=: read -r arch ctx batch <<< "$run"
  step "e2e-old-$arch-$ctx-b$batch" 150 .carry/oldb/oldbench/bin/condensate-bench \
    --dummy $arch --context $ctx --batch $batch --steps 32 --warmup 4 \
    --policy "$sk" --policy "$bm" --json "$OUT/e2e-old-$arch-$ctx-b$batch.json"
  step "e2e-new-$arch-$ctx-b$batch" 150 $BIN/condensate-bench \
    --dummy $arch --context $ctx --batch $batch --steps 32 --warmup 4 \
    --policy "$sk" --policy "$bm" --json "$OUT/e2e-new-$arch-$ctx-b$batch.json"
done
echo "=== done $(date +%T)"
