//===- TargetInfo.cpp - reductions across lanes over any target -----------===//
//
// Implements the lane reductions of TargetInfo.h on top of the target's
// shuffles.
//
//===----------------------------------------------------------------------===//
#include "TargetInfo.h"

#include "Emitter.h"

#include "llvm/Support/MathExtras.h"

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

SmallVector<Value>
mlir::condensate::laneSumTransposed(Emitter &e, const TargetInfo &target,
                                    ArrayRef<Value> values, int64_t lanes,
                                    Value lane) {
  assert(!values.empty() && llvm::isPowerOf2_64(values.size()) &&
         "laneSumTransposed takes a power of two of values");
  SmallVector<Value> v(values);
  for (int64_t o = lanes / 2; o >= 1; o /= 2) {
    if (v.size() == 1) {
      v[0] = e.fadd(v[0], target.shuffleXor(e, v[0], o));
      continue;
    }
    // The lane with bit o set keeps the upper half and receives its
    // partner's upper half; its partner keeps (and receives) the lower.
    Value upper = e.ne(e.band(lane, e.idx(o)), e.idx(0));
    size_t h = v.size() / 2;
    SmallVector<Value> next;
    for (size_t i = 0; i < h; ++i) {
      Value keep = e.select(upper, v[i + h], v[i]);
      Value send = e.select(upper, v[i], v[i + h]);
      next.push_back(e.fadd(keep, target.shuffleXor(e, send, o)));
    }
    v = std::move(next);
  }
  return v;
}
