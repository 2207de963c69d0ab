#!/usr/bin/env bash
# BENCHMARKS.md from one command (issue 11): on the GPU machine, over the
# build bench/pack_gpu.sh packed (.carry/gpu.tar.xz; on a machine with both
# LLVM/MLIR and a GPU: `bench/pack_gpu.sh && bench/benchmarks.sh`):
#   1. checks: the GPU tests against the float64 reference (driver,
#      compiler, attention, certificate) and compute-sanitizer memcheck and
#      racecheck of the attention, sketch and selection kernels;
#   2. the cold-L2 sweep of seven real-model shapes (bench/bench_cold.py:
#      SDPA cuDNN and flash, FlexAttention with a block mask of the same
#      budget, our dense, block top-k, certified and sketch steps);
#   3. Nsight Compute on every kernel of those steps at batch 1, 128K, each
#      shape (caches flushed before each kernel);
#   4. bench/benchmarks_md.py: BENCHMARKS.md (targets marked met or missed,
#      with what limits each), the full table and the plot.
# Results land in $OUT (default /tmp/out), packed as $OUT/benchmarks.tar.gz
# for reports/benchmarks/. STEPS picks steps (default: checks cold ncu md);
# CHECKS the gpu_session.sh steps of `checks`; COLD_ARGS options of
# bench_cold.py (e.g. --shapes 32/8/128); NCU_SHAPES the shapes profiled.
# Every step keeps within CALL_SECONDS (default 540, a device call's limit
# less room to pack; bench/gpu_env.sh): all steps take longer than one
# call, so a device runs them a few STEPS a call; on a machine of your own
# set CALL_SECONDS=0.
set -u
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
R=$OUT/benchmarks
mkdir -p "$R/logs" "$R/ncu"
for s in ${STEPS:-checks cold ncu md}; do
  case $s in
    checks)
      OUT=$R/logs STEPS="${CHECKS:-tests}" \
        bash bench/gpu_session.sh ;;
    cold)
      OUT=$R/logs step cold ${COLD_SECONDS:-900} python3 bench/bench_cold.py \
        --lib .carry/run/lib/libCondensateCompiler.so --json "$R/cold.json" \
        ${COLD_ARGS:-} ;;
    ncu)
      # The metrics benchmarks_md.py reads, for our kernels and SDPA's.
      M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
      M=$M,sm__throughput.avg.pct_of_peak_sustained_elapsed
      M=$M,sm__warps_active.avg.pct_of_peak_sustained_active
      M=$M,launch__registers_per_thread,launch__grid_size,launch__block_size
      M=$M,launch__occupancy_limit_registers,dram__bytes_read.sum
      for shape in ${NCU_SHAPES:-32/8/128 64/8/128 28/4/128 16/2/128 32/8/64 14/2/64 8/1/256}; do
        tag=$(echo "$shape" | tr / -)-b1-131072
        OUT=$R/logs step "ncu-$tag" 200 ncu --clock-control none \
          --cache-control all --metrics "$M" --csv --print-units base \
          --log-file "$R/ncu/$tag.csv" \
          -k 'regex:_layer[0-9]+_|flash_fwd|cudnn|fmha|sm90' \
          python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
          --shapes "$shape" --batches 1 --contexts 131072 --iters 1 \
          --max-layers 1 --no-flex --once
      done ;;
    md)
      git rev-parse --short HEAD > "$R/commit.txt" 2>/dev/null || true
      OUT=$R/logs step md 120 python3 bench/benchmarks_md.py "$R" \
        --out "$R/BENCHMARKS.md" --png "$R/cold_speedup.png" ;;
    *) echo "benchmarks.sh: unknown step '$s'" >&2; exit 2 ;;
  esac
done
tar czf "$OUT/benchmarks.tar.gz" -C "$OUT" benchmarks
ls -la "$OUT/benchmarks.tar.gz"
