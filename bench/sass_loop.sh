#!/usr/bin/env bash
# The SASS of one generated kernel, without a GPU: compiles a model file to
# PTX (condensate-translate), assembles it for sm_90 (ptxas) and
# disassembles the kernel (cuobjdump + nvdisasm, fetched once from PyPI's
# nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels into
# build/sass-tools). Prints ptxas's register and spill line and, for the
# kernel's first loop (its first backward conditional branch), the
# instruction count by opcode.
#   bench/sass_loop.sh MODEL.mlir KERNEL   (e.g. qwen_layer0_score_sketch)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 MODEL.mlir KERNEL" >&2; exit 2; }
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
TOOLS=$B/sass-tools
if [ ! -x "$TOOLS/nvidia/cu13/bin/cuobjdump" ]; then
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && pip download -q --no-deps nvidia-cuda-cuobjdump \
     nvidia-cuda-nvdisasm && for w in *.whl; do unzip -q -o "$w"; done)
fi
export PATH=$PWD/$TOOLS/nvidia/cu13/bin:/usr/local/cuda/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$B"/tools/condensate-translate/condensate-translate "$1" --emit=ptx \
  -o "$tmp/k" > /dev/null 2>&1 || { echo "$0: $1 does not compile:" >&2
  "$B"/tools/condensate-translate/condensate-translate "$1" --emit=ptx \
    -o "$tmp/k" 2>&1 | tail -3 >&2; exit 1; }
ptxas -arch=sm_90 -v "$tmp/k.ptx" -o "$tmp/k.cubin" 2>&1 |
  grep -A3 "entry function '$2'" | grep -E "spill|registers" || {
    echo "$0: no kernel '$2' in $1" >&2; exit 1; }
cuobjdump -sass -fun "$2" "$tmp/k.cubin" > "$tmp/k.sass"
python3 - "$tmp/k.sass" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
ins = [(int(m.group(1), 16), m.group(3), l) for l in lines
       for m in [re.search(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9]+)", l)] if m]
loop = next(((t, a) for a, op, l in ins if op == "BRA" and re.search(r"@!?U?P\d", l)
             for t in [int(re.search(r"BRA(?:\.U)? 0x([0-9a-f]+)", l).group(1), 16)]
             if t < a), None)
if loop is None:
    sys.exit("no loop (backward conditional branch) in the kernel")
ops = {}
for a, op, _ in ins:
    if loop[0] <= a <= loop[1]:
        ops[op] = ops.get(op, 0) + 1
print(f"loop 0x{loop[0]:x}-0x{loop[1]:x}: {sum(ops.values())} instructions")
print(", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda x: -x[1])))
PY
