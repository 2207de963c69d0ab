//===- Numerics.cpp - condensate numerics shared by both lowerings --------===//
//
// Implements the formulas of Numerics.h; both targets call these, so the
// CPU and GPU code compute the same function.
//
//===----------------------------------------------------------------------===//
#include "Numerics.h"

using namespace mlir;
using namespace mlir::condensate;

Value mlir::condensate::effectiveWindow(Emitter &e, Value windows, Value b,
                                        int64_t window, int64_t windowMax) {
  if (!windows)
    return e.idx(window);
  Value w = e.loadIndex(windows, {b});
  return e.mins(e.maxs(w, e.idx(window)), e.idx(windowMax));
}

Value mlir::condensate::unitCandidateCount(Emitter &e, Value u, Value unit,
                                           Value anchor, Value n, Value w) {
  Value lo = e.maxs(e.mul(u, unit), anchor);
  Value hi = e.mins(e.mins(e.mul(e.add(u, e.idx(1)), unit), n), e.sub(n, w));
  return e.maxs(e.sub(hi, lo), e.idx(0));
}
