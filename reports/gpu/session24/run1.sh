#!/usr/bin/env bash
# Session 24, first GPU call: where a whole decode step's time goes now, on
# the end-to-end cases of issue 12 (dummy weights): every kernel of one
# step of dense, sketch top-1024 and block_minmax top-1024, timed by
# Nsight Compute (caches flushed before each; condensate-bench --profile
# brackets the step) and summed by name (bench/ncu_step.py). Llama-3.2-1B
# at 130000 x 8, Qwen2.5-7B at 130000 x 4.
set -u
source bench/gpu_env.sh
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
bm='{"anchor":1,"window":64,"topk":1024,"selector":"block_minmax"}'
for run in llama-3.2-1b:130000:8 qwen2.5-7b:130000:4; do
  IFS=: read -r arch ctx batch <<< "$run"
  name=ncu-step-$arch-$ctx-b$batch
  step $name 280 ncu --target-processes all \
    --profile-from-start off --metrics gpu__time_duration.sum --csv \
    --log-file "$OUT/$name.csv" \
    $BIN/condensate-bench --dummy $arch --context $ctx \
    --batch $batch --steps 2 --warmup 1 --profile --policy "$sk" --policy "$bm"
  python3 bench/ncu_step.py "$OUT/$name.csv" | tee "$OUT/$name.txt"
done
echo "=== done $(date +%T)"
