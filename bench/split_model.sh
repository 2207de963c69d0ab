#!/usr/bin/env bash
# Splits a model file into parts that a GPU-machine call can carry (33 MB:
# the working tree and one part stay under a call's 64 MiB), written as
# .carry/NAME.part00, .part01, ... (git-ignored). Carry one a call and copy
# it to /root/models/ there (`cp .carry/NAME.partNN /root/models/`); the
# join-model step of bench/gpu_session.sh then joins them.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: bench/split_model.sh MODEL.gguf NAME" >&2
  exit 2
fi
[ -f "$1" ] || { echo "split_model.sh: no file $1" >&2; exit 1; }
mkdir -p "$(dirname "$0")/../.carry"
out="$(dirname "$0")/../.carry/$2.part"
rm -f "$out"*
split -b 33000000 -d "$1" "$out"
ls -la "$out"*
