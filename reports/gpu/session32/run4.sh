#!/usr/bin/env bash
# The real Qwen2.5-Coder-0.5B at 32K on the GPU with certify's fast walk
# (the 15 parts carried one a call to /root/models): the certified 4-bit
# sketch policy with open extras, tau 0.01, no value boxes, against dense,
# on the study's two 32K natural-text prompts (session 31: 14.0 and 27.5
# tok/s against 482-494 before the lists kernel and the fast walk).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
JOIN_NAME=qwen JOIN_FILE=models/Qwen2.5-Coder-0.5B-Instruct.gguf \
  STEPS="join-model" bash bench/gpu_session.sh > /dev/null 2>&1
ls -la /root/models/qwen.gguf
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":32768,"output_bound":false}'
for id in natural-32768-s7 natural-32768-0; do
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["id"] == sys.argv[2]:
        sys.stdout.write(d["text"])' \
    reports/fidelity/qwen2.5-tau/32k-natural3-plusL/prompts.jsonl \
    "$id" > "/tmp/$id.txt"
  step "qwen32k-$id-cert" 240 $BIN/condensate-decode --device gpu \
    --model /root/models/qwen.gguf --prompt-file "/tmp/$id.txt" \
    --max-new-tokens 64 --ignore-eos --policy "$cert" --compare dense
done
echo "=== done $(date +%T)"
