#!/usr/bin/env bash
# Session 20, first GPU call: where the sketch and certified steps spend
# their time at long contexts, batch 1 (Nsight Compute, one launch of each
# of our kernels, caches flushed before each: cold), before changing them.
set -u
source bench/gpu_env.sh
KERNELS='regex:_(select_topk|score_sketch|score_pages|sparse_attend|dense_attend|merge|certify|precertify)'
for shape in 28/4/128 32/8/128; do
  tag=$(echo $shape | tr / -)
  STEP_FILTER='' step ncu-$tag 200 ncu --clock-control none --cache-control all \
    -k "$KERNELS" --metrics gpu__time_duration.sum --csv \
    python3 bench/bench_cold.py --lib .carry/run/lib/libCondensateCompiler.so \
    --shapes $shape --batches 1 --contexts 131072 --iters 1 --max-layers 2
done
python3 - "$OUT" <<'PY'
import csv, glob, io, sys, collections
for f in sorted(glob.glob(sys.argv[1] + "/ncu-*.log")):
    text = open(f).read()
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []
    agg = collections.defaultdict(list)
    for r in rows:
        name = r["Kernel Name"].split("(")[0]
        agg[name + " " + r["Metric Unit"]].append(float(r["Metric Value"].replace(",", "")))
    print("==", f.split("/")[-1])
    for k, v in agg.items():
        v.sort()
        print(f"  {k:60s} n={len(v):3d} median={v[len(v)//2]:10.1f}")
PY
echo "=== done $(date +%T)"
