#!/usr/bin/env bash
# Qwen2.5-Coder-0.5B-Instruct (the real model, carried in 15 parts of
# bench/split_model.sh to /root/models/qwen.partNN, joined and checked
# against scripts/fetch-models.sh's checksum) on the GPU at the fidelity
# study's two 32K natural prompts, 64 tokens each: dense against the
# certified 4-bit sketch policy with open extras at tau 0.01 and against
# uncertified sketch top-1024 (bench/gpu_session.sh's `qwen32k` step).
set -u
STEPS="join-model qwen32k" JOIN_NAME=qwen \
  JOIN_FILE=models/Qwen2.5-Coder-0.5B-Instruct.gguf QWEN_SECONDS=135 \
  bash bench/gpu_session.sh
