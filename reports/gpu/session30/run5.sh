#!/usr/bin/env bash
# Session 30, last call: certify's chunk sums split only the slots that can
# hold an extra (at most the units), as well as run4's select change. The
# certificate test (open extras), one more shape against float64 (group 7
# bf16 pages of 64), the main job on the GPU, the
# open-extras decode at 32K x 8 (dummy Llama-3.2-1B), and the main job's
# kernels under Nsight Compute (4 tokens), and one open-extras step's.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads'
step certificate 120 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
step shapes 100 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv2_g7_p64_bf16*'
unset STEP_FILTER
[ -f /root/models/model.gguf ] || cat /root/models/model.part0[0-2] > /root/models/model.gguf
step mainjob-gpu 100 $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 64 --compare dense
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64,"output_bound":false}'
open="${cert/512/32768}"
step e2e-open 120 $BIN/condensate-bench --dummy llama-3.2-1b \
  --context 32768 --batch 8 --steps 16 --warmup 2 \
  --policy "$cert" --policy "$open" --json "$OUT/e2e-open.json"
timeout 100 ncu --target-processes all --metrics gpu__time_duration.sum --csv \
  --log-file $OUT/ncu-mainjob.csv $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 4 > $OUT/ncu-mainjob.log 2>&1
echo "ncu rc=$?"
# Every kernel of one decode step with open extras at 32K x 1 (dummy
# weights: nothing certifies early, the walk takes the whole context).
timeout 90 ncu --target-processes all --profile-from-start off \
  --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu-open.csv" \
  $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 1 \
  --steps 2 --warmup 1 --profile --policy "$open" > "$OUT/ncu-open.log" 2>&1
echo "ncu-open rc=$?"
echo "=== done $(date +%T)"
