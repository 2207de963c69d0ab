#!/usr/bin/env bash
# Session 48, one GPU call for what the device time left allows (carry
# [".carry/gpu.tar.xz", ".carry/cap8k.tar.xz"]), on this session's build
# (bench/pack_gpu.sh, recompressed with xz -9e; its kernels are main's).
# Results go straight to $OUT, so that a call stopped at its limit still
# returns what it wrote:
#   1. the cold sweep of the seven shapes (benchmarks.sh `cold`) on the
#      key cases: batch 1, 8, 32 at 16K, 32K, 128K and 1M tokens;
#   2. attention on KV captured from SmolLM2-135M at 8,164 tokens (layers 5
#      and 20, bf16; `condensate-decode --long-prompt 8150 --capture-kv
#      cap8k --capture-layers 5,20 --kv-type bf16`): bench/bench_captured.py,
#      one sequence and 8 (each the captured one in its own pages);
#   3. the checks (every GPU test against the float64 reference,
#      compute-sanitizer memcheck and racecheck: benchmarks.sh `checks`)
#      in what is left.
# Nsight Compute (benchmarks.sh `ncu`) is a further call where device time
# allows.
set -u
mkdir -p $OUT/benchmarks/logs
nvidia-smi -L
export CALL_SECONDS=${CALL_SECONDS:-400}
source bench/gpu_env.sh
COLD_SECONDS=${COLD_SECONDS:-200} \
  COLD_ARGS="--batches 1,8,32 --contexts 16384,32768,131072,1048576" \
  STEPS=cold bash bench/benchmarks.sh > $OUT/cold-run.log 2>&1
tail -3 $OUT/cold-run.log
tar xJf .carry/cap8k.tar.xz -C /tmp
OUT=$OUT/benchmarks/logs step captured 80 python3 bench/bench_captured.py \
  --lib .carry/run/lib/libCondensateCompiler.so --kv /tmp/cap8k \
  --taus 1e-2,1e-1 --json $OUT/benchmarks/captured.json
OUT=$OUT/benchmarks/logs step captured-b8 60 python3 bench/bench_captured.py \
  --lib .carry/run/lib/libCondensateCompiler.so --kv /tmp/cap8k \
  --taus 1e-2,1e-1 --batch 8 --json $OUT/benchmarks/captured-b8.json
TEST_SECONDS=${TEST_SECONDS:-120} STEPS=checks bash bench/benchmarks.sh \
  > $OUT/checks-run.log 2>&1
tail -30 $OUT/checks-run.log
rm -f $OUT/benchmarks.tar.gz
