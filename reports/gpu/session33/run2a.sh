#!/usr/bin/env bash
# Session 33, GPU call 2a: main's libraries (.carry/oldlib/: the compiler
# library of HEAD 7ec4dc0 and the runtime it links) timed cold, as the
# baseline of run2.sh's new build on the same machine.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p /root/oldlib "$OUT"
xz -dc .carry/oldlib/libCondensateCompiler.so.xz > /root/oldlib/libCondensateCompiler.so
cp .carry/oldlib/libCondensateRuntime.so /root/oldlib/
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv
LD_LIBRARY_PATH=/root/oldlib CONDENSATE_CACHE_DIR=/tmp/cache-old \
  timeout 200 python3 bench/bench_cold.py --lib /root/oldlib/libCondensateCompiler.so \
  --json $OUT/cold-old.json --shapes 32/8/128,28/4/128,32/8/64,8/1/256 \
  --batches 1,8 --contexts 32768,131072 --no-flex > $OUT/cold-old.log 2>&1
echo "rc=$?"; grep '^|' $OUT/cold-old.log | tail -20
