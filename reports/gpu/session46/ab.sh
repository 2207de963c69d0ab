#!/usr/bin/env bash
# Session 46's call (not run: no machine could be started; the next
# session runs it): main's dense rule against the branch's one-wave rule
# (s45-dense-batch, denseBlockTarget), cold in L2 in one call, then every
# GPU test and the sanitizers on the branch's build. Here, on the branch:
#   bench/pack_gpu.sh                                  # the branch: base
#   bench/pack_delta.sh main MAIN/libCondensateCompiler.so
# (MAIN: main's build, e.g. .carry/new.tar.xz's lib/, ab60658's, which
# main's later commits leave PTX-identical). Carry [".carry/gpu.tar.xz",
# ".carry/main.xd3", ".carry/xdelta3"] (62.5 MB with the tree).
set -u
O=$OUT
export OUT=/tmp/o
export CALL_SECONDS=${CALL_SECONDS:-500}
source bench/gpu_env.sh
nvidia-smi -L
ROUNDS=${ROUNDS:-2} COLD_AB_SECONDS=${COLD_AB_SECONDS:-80} STEPS=cold-ab \
  bash bench/gpu_session.sh 2>&1 | grep -v "^===" | tail -40
TEST_SECONDS=${TEST_SECONDS:-200} STEPS=checks bash bench/benchmarks.sh 2>&1 | tail -34
tar czf $O/ab.tar.gz -C /tmp/o .
