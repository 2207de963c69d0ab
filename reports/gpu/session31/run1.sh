#!/usr/bin/env bash
# Branch gpu-pending/certify-scan (not run in session 30: no GPU time
# left): certify finds the first chunk within tau by a parallel prefix sum
# of the chunk sums (Hillis-Steele, one thread a chunk) and an atomic min,
# instead of thread 0 scanning up to 256 chunks with a division per head
# each. Checks and times what run5 did: the certificate test (open
# extras), shapes against float64 incl. the widest group (16) and G = 7,
# racecheck on the certificate, the main job on the GPU (real SmolLM2 in
# /root/models, carried in parts) and its kernels under ncu.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads'
step certificate 120 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
step shapes 200 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='*d128_kv2_g7_p64_bf16*:*d64_kv1_g16_p16_bf16*:*d64_kv3_g3_p16_f32*'
STEP_FILTER='PASSED|FAILED|ERROR SUMMARY|Failure|RACECHECK SUMMARY'
step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
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
  --policy @examples/certified.mlir --max-new-tokens 4 > $OUT/ncu-mainjob.log 2>&1
python3 bench/ncu_step.py $OUT/ncu-mainjob.csv | head -12
echo "=== done $(date +%T)"
