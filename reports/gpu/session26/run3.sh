#!/usr/bin/env bash
# Session 26, third GPU call: every kernel of one decode step of dummy
# Qwen2.5-7B at 130000 x 4 (dense, sketch top-1024, block_minmax
# top-1024), Nsight Compute with caches flushed, summed by name
# (bench/ncu_step.py). Session 24's attempt ran past its limit in the
# prefill (an append launch a position under ncu); prefill now appends a
# layer's rows in one call.
set -u
source bench/gpu_env.sh
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
for run in qwen2.5-7b:130000:4; do
  IFS=: read -r arch ctx batch <<< "$run"
  name=ncu-step-$arch-$ctx-b$batch
  step $name 400 ncu --target-processes all \
    --profile-from-start off --metrics gpu__time_duration.sum --csv \
    --log-file "$OUT/$name.csv" \
    $BIN/condensate-bench --dummy $arch --context $ctx \
    --batch $batch --steps 2 --warmup 1 --profile --policy "$sk" --policy "$bm"
  python3 bench/ncu_step.py "$OUT/$name.csv" | tee "$OUT/$name.txt"
done
echo "=== done $(date +%T)"
