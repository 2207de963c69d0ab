#!/usr/bin/env bash
# Written in session 39 for the next GPU session (not run yet): issue 10's
# H200 target on the model's own KV. SmolLM2-135M (9/3/64, 30 layers) on
# 8000 tokens of real text (the licenses in /usr/share/common-licenses,
# condensate-bench --prompt-file), batch 1 and 8: dense, uncertified sketch
# top-1025 and the certified sketch policy at tau 1e-2 and 1e-1 (open
# extras, as the fidelity study's cert-open-*): step times, bytes read and
# the certificate's pass and fallback rates on this KV; then one step of
# each under Nsight Compute (its kernels, caches flushed between them,
# summed by bench/ncu_step.py), and cuDNN / flash SDPA on the same head
# shape cold (bench_cold.py 9/3/64 at 8192) for the per-layer comparison.
#
# Before it: bench/pack_gpu.sh (the full pack: condensate-bench), and the
# model in three calls, back to back (the machine keeps /root while warm):
#   carry [".carry/model.part00"], run
#     mkdir -p /root/models && cp .carry/model.part00 /root/models/
#   and the same for part01 and part02 (bench/split_model.sh made them).
# Then carry [".carry/gpu.tar.xz"] and run this script.
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-560}
source bench/gpu_env.sh
M=/root/models/model.gguf
[ -f $M ] || cat /root/models/model.part0[0-2] > $M
ls -la $M
cat /usr/share/common-licenses/* > /tmp/licenses.txt
SK='{"anchor":1,"window":64,"topk":960,"selector":"sketch","bits":4}'
C2='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":32768}'
C1='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.1,"max_extra":32768}'
POL=(--policy "$SK" --policy "$C2" --policy "$C1")
for b in 1 8; do
  step bench-b$b 100 $BIN/condensate-bench --model $M \
    --prompt-file /tmp/licenses.txt --context 8000 --batch $b --steps 32 \
    --warmup 4 "${POL[@]}" --json $OUT/bench-b$b.json
done
step ncu-b1 200 ncu --target-processes all --profile-from-start off \
  --metrics gpu__time_duration.sum --csv --log-file $OUT/ncu-b1.csv \
  $BIN/condensate-bench --model $M --prompt-file /tmp/licenses.txt \
  --context 8000 --batch 1 --steps 2 --warmup 1 --profile "${POL[@]}"
python3 bench/ncu_step.py $OUT/ncu-b1.csv --steps 4 \
  --names dense,sketch-1025,cert-open-1e-2,cert-open-1e-1 | tee $OUT/ncu-b1.txt
step cold 90 python3 bench/bench_cold.py \
  --lib .carry/run/lib/libCondensateCompiler.so --shapes 9/3/64 \
  --batches 1,8 --contexts 8192 --no-flex --json $OUT/cold.json
tar czf $O/real-kv.tar.gz -C /tmp/o .
