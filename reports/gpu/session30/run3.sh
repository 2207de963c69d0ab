#!/usr/bin/env bash
# Session 30, GPU call with the real SmolLM2-135M-Instruct Q4_1 (carried in
# three parts to /root/models/model.gguf): the GPU decoder tests that need
# it, then the README's main job on the GPU (examples/certified.mlir, its
# certificate with the extras' lower bounds) against dense.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|skip|agree|certif'
CONDENSATE_MODEL=/root/models/model.gguf step decoder 300 \
  $BIN/GPUDecoderTest --gtest_brief=1
unset STEP_FILTER
step mainjob-gpu 200 $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 64 --compare dense
echo "=== done $(date +%T)"
