#!/usr/bin/env bash
# Session 44, call 2: the GPU attention tests again after the fix of the
# final reduction's shuffle offsets (call 1's build failed every
# tensor-core shape there; its loop, and so its timings, are unchanged):
# six tests side by side, one process each — groups 1, 4, 7, 8 (the
# transposed body, head_dim 64, 128, 256) and 16 (untransposed), and the
# short token top-k caches. Carry [".carry/gpu.tar.xz"].
set -u
O=$OUT
export OUT=/tmp/o
source bench/gpu_env.sh
nvidia-smi -L
i=0
for f in '*d128_kv8_g4_p64_bf16*' '*d256_kv1_g8_p64_bf16*' '*d64_kv1_g16_p16_bf16*' \
         '*d128_kv2_g7_p64_bf16*' '*d64_kv2_g1_p64_bf16*' 'GPUAttentionTokenTopK.ShortCaches'; do
  timeout 200 $BIN/GPUAttentionTest --gtest_filter="$f" > $OUT/test$i.log 2>&1 &
  i=$((i + 1))
done
wait
grep -hE "OK \]|FAILED  \]|tests ran" $OUT/test*.log
grep -h -m3 -A3 "Failure" $OUT/test*.log | head -20
tar czf $O/run2.tar.gz -C /tmp/o .
