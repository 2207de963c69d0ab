#!/usr/bin/env bash
# Session 36, GPU call 6: why dense attention at head_dim 256 stays at a
# third of DRAM bandwidth: Nsight Compute's occupancy, warp-state and
# memory sections for the dense kernel of 8/1/256 (the ring of 2) and of
# 32/8/128 (registers, 87% of DRAM) at B1/128K, and of 8/1/256's sparse
# attention (block top-k).
set -u
O=$OUT
export OUT=/tmp/o6
source bench/gpu_env.sh
for shape in 8/1/256 32/8/128; do
  tag=$(echo "$shape" | tr / -)
  step "ncu-$tag" 80 ncu --clock-control none --cache-control all \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section SpeedOfLight --section LaunchStats \
    -k 'regex:_layer[01]_(dense|sparse)_attend$' --launch-count 2 \
    python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
    --shapes "$shape" --batches 1 --contexts 131072 --iters 1 \
    --max-layers 1 --no-flex --once
done
tar czf $O/run6.tar.gz -C /tmp/o6 .
