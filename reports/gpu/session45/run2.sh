#!/usr/bin/env bash
# Session 45, the last call: the build whose dense launches fill one wave
# of the chip (denseBlockTarget) timed cold over five real-model shapes,
# batch 1, 8 and 32, 16K and 128K (bench/bench_cold.py, beside SDPA in the
# same process), then every GPU test and memcheck/racecheck on it
# (run.sh). Carry [".carry/gpu.tar.xz"] (bench/pack_gpu.sh).
set -u
O=$OUT
source bench/gpu_env.sh
nvidia-smi -L
timeout 90 python3 bench/bench_cold.py --lib $PWD/.carry/run/lib/libCondensateCompiler.so \
  --shapes 32/8/128,28/4/128,16/2/128,14/2/64,8/1/256 --batches 1,8,32 \
  --contexts 16384,131072 --no-flex --json $O/full-v2.json > $O/full-v2.log 2>&1
grep -A40 "^| shape" $O/full-v2.log | cut -d'|' -f2-9
TEST_SECONDS=125 OUT=$O bash reports/gpu/session45/run.sh
