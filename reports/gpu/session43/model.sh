#!/usr/bin/env bash
# Session 43, call 5: the GPU decoder on the real model after the fallback
# memory (the captured step's key now carries the layer plan): the full
# GPUDecoderTest with SmolLM2, then the README's main job on the GPU
# (certified policy, --fallback-memory default, against dense).
# Three calls first carry .carry/model.part00..02 each running
#   mkdir -p /root/models && cp .carry/model.part0N /root/models/
# then this, carrying [".carry/gpu.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o5
export CALL_SECONDS=${CALL_SECONDS:-230}
source bench/gpu_env.sh
nvidia-smi -L
[ -f /root/models/model.gguf ] || cat /root/models/model.part0[0-2] > /root/models/model.gguf
ls -la /root/models/model.gguf
STEP_FILTER='^\[       OK|FAILED|Failure|PASSED|SKIPPED|tests ran'
CONDENSATE_MODEL=/root/models/model.gguf step decoder 150 $BIN/GPUDecoderTest
unset STEP_FILTER
step mainjob 60 $BIN/condensate-decode --device gpu --model /root/models/model.gguf \
  --chat --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 64 --compare dense
tar czf $O/model.tar.gz -C /tmp/o5 .
