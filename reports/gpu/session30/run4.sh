#!/usr/bin/env bash
# Session 30: select_topk ranks extras past 1024 a list of 1024 at a time
# (was one argmax pass over the units per slot). The certificate test with
# open extras (CPU = GPU, walks past 1024 extras), token top-k and two
# shapes against float64, racecheck; then the README's main job on the GPU
# (real SmolLM2, carried in parts to /root/models) and decode speed on
# dummy Llama-3.2-1B at 32K x 8: dense, certified sketch with 512 extras
# and with open extras (examples/certified.mlir's kind of policy).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads'
step certificate 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
step shapes 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv8_g4_p64_bf16*:*d64_kv3_g3_p16_f32*:GPUAttentionTokenTopK.*'
unset STEP_FILTER
if [ ! -f /root/models/model.gguf ]; then
  cat /root/models/model.part0[0-2] > /root/models/model.gguf
fi
step mainjob-gpu 150 $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 64 --compare dense
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64,"output_bound":false}'
open="${cert/512/32768}"
step e2e-open 200 $BIN/condensate-bench --dummy llama-3.2-1b \
  --context 32768 --batch 8 --steps 16 --warmup 2 \
  --policy "$cert" --policy "$open" --json "$OUT/e2e-open.json"
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure|RACECHECK SUMMARY'
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='*d128_kv8_g4_p64_bf16*'
echo "=== done $(date +%T)"
