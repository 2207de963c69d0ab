#!/usr/bin/env bash
# Times of 11-bit radix digits in select_topk against 8-bit ones (the
# library of 4bc55d4, carried xz-compressed and unpacked to /root/oldlib by
# an earlier call), same machine, same binaries, dummy Llama-3.2-1B at
# 32K x 8: dense, sketch top-1024, the certified sketch policy with 512
# extras and with open extras (no value boxes); then one open-extras step
# at 32K x 1 under Nsight Compute (new).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -f /root/oldlib/libCondensateCompiler.so ] || xz -dk /root/oldlib/libCondensateCompiler.so.xz
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64,"output_bound":false}'
open="${cert/512/32768}"
for lib in old new old new; do
  libdir=$PWD/.carry/run/lib
  [ $lib = old ] && libdir=/root/oldlib:$libdir
  LD_LIBRARY_PATH=$libdir:$LD_LIBRARY_PATH step e2e-$lib 150 \
    $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 8 \
    --steps 16 --warmup 2 --policy "$sk" --policy "$cert" --policy "$open" \
    --json "$OUT/e2e-$lib.json"
done
timeout 90 ncu --target-processes all --profile-from-start off \
  --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu-open.csv" \
  $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 1 \
  --steps 2 --warmup 1 --profile --policy "$open" > /dev/null 2>&1
python3 bench/ncu_step.py $OUT/ncu-open.csv > $OUT/ncu-open.txt
rm -f $OUT/ncu-open.csv; head -12 $OUT/ncu-open.txt
echo "=== done $(date +%T)"
