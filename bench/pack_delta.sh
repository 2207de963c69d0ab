#!/usr/bin/env bash
# Packs another build of the compiler library as a binary delta against the
# one bench/pack_gpu.sh packed (.carry/gpu.tar.xz), so that several builds
# travel in one GPU-machine call and are timed in it side by side: two
# compiler libraries and the tree exceed the 64 MiB a call carries, a delta
# between two builds of the same tree is about 5 MB. Writes
# .carry/NAME.xd3 (and .carry/xdelta3, the tool, once); on the GPU machine
# bench/gpu_env.sh rebuilds it as .carry/builds/NAME/lib and the cold-ab
# step of bench/gpu_session.sh times every build. Carry .carry/gpu.tar.xz,
# .carry/xdelta3 and the .carry/NAME.xd3 files.
#   bench/pack_delta.sh NAME [LIBRARY]
# LIBRARY: a libCondensateCompiler.so (default: this build's,
# $BUILD_DIR/runtime/, BUILD_DIR=build); needs xdelta3 (apt-get install
# xdelta3).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[A-Za-z0-9_-]+$ ]]; then
  echo "usage: bench/pack_delta.sh NAME [LIBRARY] (NAME: letters, digits, - and _)" >&2
  exit 2
fi
NAME=$1
# LIBRARY as given (relative to where this runs), then the repository.
if [ $# -eq 2 ]; then
  [ -f "$2" ] || { echo "pack_delta.sh: no library $2" >&2; exit 1; }
  LIB=$(realpath "$2")
fi
cd "$(dirname "$0")/.."
LIB=${LIB:-${BUILD_DIR:-build}/runtime/libCondensateCompiler.so}
[ -f "$LIB" ] || { echo "pack_delta.sh: no library $LIB" >&2; exit 1; }
[ -f .carry/gpu.tar.xz ] || { echo "pack_delta.sh: no .carry/gpu.tar.xz (run bench/pack_gpu.sh first)" >&2; exit 1; }
command -v xdelta3 > /dev/null || { echo "pack_delta.sh: xdelta3 not found (apt-get install xdelta3)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
tar xJf .carry/gpu.tar.xz -C "$T" ./lib/libCondensateCompiler.so
cp "$LIB" "$T/new.so"
strip --strip-unneeded "$T/new.so"
xdelta3 -e -9 -S lzma -B 134217728 -f -s "$T/lib/libCondensateCompiler.so" \
  "$T/new.so" ".carry/$NAME.xd3"
cp "$(command -v xdelta3)" .carry/xdelta3
ls -la ".carry/$NAME.xd3"
