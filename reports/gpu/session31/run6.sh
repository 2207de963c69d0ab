#!/usr/bin/env bash
# The committed select change (later lists in a kernel of their own, a
# list past every candidate skipping its searches) with certify as in
# run3: the certificate test (incl. the layer capped at 2048 extras), then
# Qwen2.5-Coder-0.5B at the study's 32K prompt natural-32768-s7 (parts
# carried to /root/models as for run4): dense against certified open
# extras and sketch top-1024.
set -u
source bench/gpu_env.sh
STEP_FILTER='PASSED|FAILED|SKIPPED|Failure|heads'
step certificate 150 $BIN/GPUAttentionTest --gtest_brief=1 \
  --gtest_filter='GPUCertificate.*'
unset STEP_FILTER
STEPS="join-model qwen32k" JOIN_NAME=qwen \
  JOIN_FILE=models/Qwen2.5-Coder-0.5B-Instruct.gguf QWEN_SECONDS=100 \
  QWEN_PROMPTS=natural-32768-s7 bash bench/gpu_session.sh
