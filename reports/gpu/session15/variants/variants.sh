#!/usr/bin/env bash
# Experiment: kernel variants by env knobs (not committed).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT .carry/run
tar xJf .carry/gpu.tar.xz -C .carry/run
export LD_LIBRARY_PATH=$PWD/.carry/run/lib
BIN=.carry/run/bin
sk='{"anchor":1,"window":64,"topk":1024,"selector":"sketch","bits":4}'
run() { # name model env...
  local name=$1 model=$2; shift 2
  echo "=== $name $model $(date +%T)"
  env CONDENSATE_CACHE_DIR=/tmp/cache-$name "$@" timeout 120 $BIN/condensate-bench --dummy $model \
    --context 32768 --batch 8 --steps 16 --warmup 2 --policy "$sk" > $OUT/$name-$model.log 2>&1
  grep -E "^(dense|policy)" $OUT/$name-$model.log
}
run base llama-3.2-1b X=1
run acc16 llama-3.2-1b CONDENSATE_EXP_SKETCH_ACC=16
run acc8 llama-3.2-1b CONDENSATE_EXP_SKETCH_ACC=8
run unroll8 llama-3.2-1b CONDENSATE_EXP_SELECT_UNROLL=8
run t512 llama-3.2-1b CONDENSATE_EXP_SELECT_THREADS=512
run nomatch llama-3.2-1b CONDENSATE_EXP_SELECT_NOMATCH=1
run base llama-3-8b X=1
run acc16 llama-3-8b CONDENSATE_EXP_SKETCH_ACC=16
run acc8 llama-3-8b CONDENSATE_EXP_SKETCH_ACC=8
echo "=== ncu $(date +%T)"
CONDENSATE_CACHE_DIR=/tmp/cache-base timeout 200 ncu --target-processes all \
  --kernel-name regex:'layer0_(score_sketch|select_topk)' --launch-skip 32 --launch-count 2 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section ComputeWorkloadAnalysis --section SourceCounters \
  $BIN/condensate-bench --dummy llama-3.2-1b --context 32768 --batch 8 --steps 2 --warmup 1 \
  --policy "$sk" > $OUT/ncu-sections.log 2>&1
grep -E "Duration|Issue Slots|Warp Cycles Per Issued|Registers Per|Achieved Occ" $OUT/ncu-sections.log
echo "=== done $(date +%T)"
