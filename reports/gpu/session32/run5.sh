#!/usr/bin/env bash
# (after run4, same machine) Every kernel of the real Qwen2.5-Coder-0.5B's
# certified open-extras decode at 32K (prompt natural-32768-s7, 3 tokens:
# the prefill and 2 decode steps), Nsight Compute, summed by name.
source bench/gpu_env.sh >/dev/null
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":32768,"output_bound":false}'
timeout 300 ncu --target-processes all --metrics gpu__time_duration.sum --csv \
  --log-file $OUT/ncu-qwen.csv $BIN/condensate-decode --device gpu \
  --model /root/models/qwen.gguf --prompt-file /tmp/natural-32768-s7.txt \
  --max-new-tokens 3 --ignore-eos --policy "$cert" > $OUT/ncu-qwen.log 2>&1
echo rc=$?
python3 bench/ncu_step.py $OUT/ncu-qwen.csv > $OUT/ncu-qwen.txt
rm -f $OUT/ncu-qwen.csv; head -30 $OUT/ncu-qwen.txt
