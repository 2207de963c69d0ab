#!/usr/bin/env bash
# What bounds selection with open extras (main's library, 4bc55d4, in
# /root/oldlib: this build's select_topk): Nsight Compute's full set on one
# select_topk and one select_topk_lists launch of an open-extras step at
# 32K x 1 (dummy Llama-3.2-1B), as text.
set -u
source bench/gpu_env.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
[ -f /root/oldlib/libCondensateCompiler.so ] || xz -dk /root/oldlib/libCondensateCompiler.so.xz
export LD_LIBRARY_PATH=/root/oldlib:$LD_LIBRARY_PATH
open='{"anchor":1,"window":64,"topk":192,"selector":"sketch","bits":4,"tau":0.01,"max_extra":32768,"page_size":64,"output_bound":false}'
for k in select_topk select_topk_lists; do
  timeout 200 ncu --target-processes all --profile-from-start off \
    --kernel-name regex:"layer0_${k}\$" --launch-count 1 --set full \
    -o /tmp/ncu-$k $BIN/condensate-bench --dummy llama-3.2-1b \
    --context 32768 --batch 1 --steps 2 --warmup 1 --profile \
    --policy "$open" > $OUT/ncu-$k.log 2>&1
  ncu --import /tmp/ncu-$k.ncu-rep --page details > $OUT/ncu-$k-details.txt 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Issued Ipc|Achieved Occupancy|Stall|Registers Per|Memory Throughput|Compute \(SM\)|Shared Memory|One or More|No Eligible|Local|stalled|spends" $OUT/ncu-$k-details.txt | head -40
done
echo "=== done $(date +%T)"
