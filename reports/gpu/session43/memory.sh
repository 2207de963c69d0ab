#!/usr/bin/env bash
# Session 43, call 4: the decoder's fallback memory (DecoderOptions::
# fallbackMemory) on the GPU: GPUDecoder.FallbackMemoryMatchesCPU, then
# end to end at 32K on dummy Llama-3.2-1B batch 8, dummy Llama-3-8B
# batch 8 and Llama-3.2-1B batch 1: dense, sketch top-1024, the certified
# 4-bit sketch policy with 512 extras, with the memory (16, the tools'
# default) and without it (0). Carry [".carry/gpu.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-470}
source bench/gpu_env.sh
nvidia-smi -L
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|SKIPPED|tests ran'
step decoder 90 $BIN/GPUDecoderTest --gtest_filter='*Fallback*:*Synthetic*'
unset STEP_FILTER
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64}'
for run in llama-3.2-1b:32768:8 llama-3-8b:32768:8 llama-3.2-1b:32768:1; do
  IFS=: read -r arch ctx batch <<< "$run"
  for m in 16 0; do
    step "e2e-$arch-$ctx-b$batch-m$m" 120 $BIN/condensate-bench --dummy $arch \
      --context $ctx --batch $batch --steps 32 --warmup 4 --fallback-memory $m \
      --policy "$sk" --policy "$cert" --json "$OUT/e2e-$arch-$ctx-b$batch-m$m.json"
  done
done
tar czf $O/memory.tar.gz -C /tmp/o .
