#!/usr/bin/env bash
# select_topk ranks each list of extras past the first 1024 in a block of
# a second kernel (select_topk_lists: grid (list, kv head, sequence)), not
# one list after another in one block; certify's chunk sums take a warp a
# chunk (lanes on consecutive slots) and warp 0 walks the chunk 32 slots
# a round (prefix sums over the lanes), not one thread. Checks: the
# certificate test (now also a sketch layer capped at 2048 extras, whose
# long sequences go through the prefilter), shapes against float64
# (groups 7 and 16), racecheck and memcheck on the certificate test;
# times: the main job on the GPU and its kernels, open extras at 32K x 8
# and one open-extras step at 32K x 1 (dummy Llama-3.2-1B).
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads'
step certificate 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
step shapes 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure|RACECHECK SUMMARY'
step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
step memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
  $BIN/GPUAttentionTest --gtest_brief=1 --gtest_filter='GPUCertificate.*'
unset STEP_FILTER
[ -f /root/models/model.gguf ] || cat /root/models/model.part0[0-2] > /root/models/model.gguf
step mainjob-gpu 100 $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 64 --compare dense
timeout 100 ncu --target-processes all --metrics gpu__time_duration.sum --csv \
  --log-file $OUT/ncu-mainjob.csv $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 4 > /dev/null 2>&1
python3 bench/ncu_step.py $OUT/ncu-mainjob.csv > $OUT/ncu-mainjob.txt
head -16 $OUT/ncu-mainjob.txt
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64,"output_bound":false}'
open="${cert/512/32768}"
step e2e-open 120 $BIN/condensate-bench --dummy llama-3.2-1b \
  --context 32768 --batch 8 --steps 16 --warmup 2 \
  --policy "$cert" --policy "$open" --json "$OUT/e2e-open.json"
timeout 90 ncu --target-processes all --profile-from-start off \
  --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu-open.csv" \
  $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 1 \
  --steps 2 --warmup 1 --profile --policy "$open" > /dev/null 2>&1
python3 bench/ncu_step.py $OUT/ncu-open.csv > $OUT/ncu-open.txt
head -14 $OUT/ncu-open.txt
rm -f $OUT/*.csv
echo "=== done $(date +%T)"
