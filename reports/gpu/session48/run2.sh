#!/usr/bin/env bash
# Session 48, GPU call 2 (carry [".carry/cap8k.tar.xz"]; the build is the
# one run1.sh unpacked on the same warm machine):
#   1. attention on KV captured from SmolLM2-135M at 8,164 tokens (layers 5
#      and 20, bf16; `condensate-decode --long-prompt 8150 --capture-kv
#      cap8k --capture-layers 5,20 --kv-type bf16`): bench/bench_captured.py;
#   2. Nsight Compute of every kernel at B1/128K, each shape
#      (bench/benchmarks.sh `ncu`).
set -u
O=$OUT
export OUT=/tmp/o
mkdir -p $OUT/benchmarks/logs
nvidia-smi -L
export CALL_SECONDS=${CALL_SECONDS:-550}
source bench/gpu_env.sh
tar xJf .carry/cap8k.tar.xz -C /tmp
OUT=$OUT/benchmarks/logs step captured 100 python3 bench/bench_captured.py \
  --lib .carry/run/lib/libCondensateCompiler.so --kv /tmp/cap8k \
  --taus 1e-2,1e-1 --json $OUT/benchmarks/captured.json
OUT=$OUT/benchmarks/logs step captured-b8 60 python3 bench/bench_captured.py \
  --lib .carry/run/lib/libCondensateCompiler.so --kv /tmp/cap8k \
  --taus 1e-2,1e-1 --batch 8 --json $OUT/benchmarks/captured-b8.json
STEPS=ncu bash bench/benchmarks.sh > $OUT/ncu-run.log 2>&1
tail -8 $OUT/ncu-run.log
tar czf $O/run2.tar.gz -C /tmp/o .
