#!/usr/bin/env bash
# Times of certify's fast walk against main's certify (the library of
# cd93867, carried xz-compressed and unpacked to /root/oldlib by an earlier
# call), same machine, same binaries: the README's main job on the GPU
# (SmolLM2 parts in /root/models) and certified open extras at 32K x 8
# (dummy Llama-3.2-1B), each old then new; then one open-extras step's
# kernels at 32K x 1 and the main job's kernels (Nsight Compute, new).
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -f /root/models/model.gguf ] || cat /root/models/model.part0[0-2] > /root/models/model.gguf
[ -f /root/oldlib/libCondensateCompiler.so ] || xz -dk /root/oldlib/libCondensateCompiler.so.xz
cert='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":512,"page_size":64,"output_bound":false}'
open="${cert/512/32768}"
for lib in old new; do
  libdir=$PWD/.carry/run/lib
  [ $lib = old ] && libdir=/root/oldlib:$libdir
  LD_LIBRARY_PATH=$libdir:$LD_LIBRARY_PATH step mainjob-$lib 100 \
    $BIN/condensate-decode --device gpu --model /root/models/model.gguf --chat \
    --prompt-file reports/gpu/session30/main-job-prompt.txt \
    --policy @examples/certified.mlir --max-new-tokens 64 --compare dense
  LD_LIBRARY_PATH=$libdir:$LD_LIBRARY_PATH step e2e-open-$lib 150 \
    $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 8 \
    --steps 16 --warmup 2 --policy "$cert" --policy "$open" \
    --json "$OUT/e2e-open-$lib.json"
done
timeout 90 ncu --target-processes all --profile-from-start off \
  --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu-open.csv" \
  $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 1 \
  --steps 2 --warmup 1 --profile --policy "$open" > "$OUT/ncu-open.log" 2>&1
python3 bench/ncu_step.py $OUT/ncu-open.csv > $OUT/ncu-open.txt
head -16 $OUT/ncu-open.txt
timeout 100 ncu --target-processes all --metrics gpu__time_duration.sum --csv \
  --log-file $OUT/ncu-mainjob.csv $BIN/condensate-decode --device gpu \
  --model /root/models/model.gguf --chat \
  --prompt-file reports/gpu/session30/main-job-prompt.txt \
  --policy @examples/certified.mlir --max-new-tokens 4 > /dev/null 2>&1
python3 bench/ncu_step.py $OUT/ncu-mainjob.csv > $OUT/ncu-mainjob.txt
head -16 $OUT/ncu-mainjob.txt
rm -f $OUT/*.csv
echo "=== done $(date +%T)"
