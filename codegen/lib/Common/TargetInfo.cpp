//===- TargetInfo.cpp - reductions across lanes over any target -----------===//
//
// Implements the lane reductions of TargetInfo.h on top of the target's
// shuffles.
//
//===----------------------------------------------------------------------===//
#include "TargetInfo.h"

#include "Emitter.h"

using namespace mlir;
using namespace mlir::condensate;

Value mlir::condensate::laneReduce(
    Emitter &e, const TargetInfo &target, Value v, int64_t lanes,
    llvm::function_ref<Value(Value, Value)> combine) {
  for (int64_t o = lanes / 2; o >= 1; o /= 2)
    v = combine(v, target.shuffleXor(e, v, o));
  return v;
}

Value mlir::condensate::laneSum(Emitter &e, const TargetInfo &target, Value v,
                                int64_t lanes) {
  return laneReduce(e, target, v, lanes,
                    [&](Value x, Value y) { return e.fadd(x, y); });
}

Value mlir::condensate::laneMax(Emitter &e, const TargetInfo &target, Value v,
                                int64_t lanes) {
  return laneReduce(e, target, v, lanes,
                    [&](Value x, Value y) { return e.fmax(x, y); });
}
