//===- Sketch.cpp - key sketches shared by both lowerings -----------------===//
//
// Implements the formulas of Sketch.h.
//
//===----------------------------------------------------------------------===//
#include "Sketch.h"

#include "condensate/ABI/AttentionABI.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::condensate;
namespace abi = ::condensate::abi;

namespace {

double levels(int64_t bits) { return double((int64_t(1) << bits) - 1); }

/// A constant of the shape of `like` (a scalar or a vector of f32/i32).
Value constLike(Emitter &e, Value like, double v) {
  Type t = like.getType();
  auto vt = dyn_cast<VectorType>(t);
  Type elt = vt ? vt.getElementType() : t;
  Value c = elt.isF32() ? e.f32(v) : e.i32(static_cast<int64_t>(v));
  return vt ? e.splat(c, vt.getNumElements()) : c;
}

Value fabs(Emitter &e, Value v) {
  return math::AbsFOp::create(e.builder(), e.location(), v);
}

} // namespace

Value mlir::condensate::sketchCode(Emitter &e, Value k, Value lo, Value hi,
                                   int64_t bits) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  double L = levels(bits);
  Value range = e.fsub(hi, lo);
  Value positive = e.fcmp(arith::CmpFPredicate::OGT, range, e.f32(0.0));
  Value inv = e.fdiv(e.f32(L), e.select(positive, range, e.f32(1.0)));
  // One explicit fused multiply-add: NVPTX would contract a separate
  // multiply and add into one, the CPU would not, and a code at a rounding
  // boundary would differ between the two caches.
  Value r = math::FloorOp::create(
      b, loc, e.fma(e.fsub(k, lo), inv, e.f32(0.5)));
  // Ordered compares: NaN lands on 0.
  r = e.select(e.fcmp(arith::CmpFPredicate::OGT, r, e.f32(0.0)), r,
               e.f32(0.0));
  r = e.select(e.fcmp(arith::CmpFPredicate::OLT, r, e.f32(L)), r, e.f32(L));
  r = e.select(positive, r, e.f32(0.0));
  return arith::FPToUIOp::create(b, loc, b.getI32Type(), r);
}

SketchRow mlir::condensate::sketchRow(Emitter &e, ArrayRef<Value> lo,
                                      ArrayRef<Value> hi, int64_t bits,
                                      int64_t headDim) {
  SketchRow row;
  double invL = 1.0 / levels(bits);
  double gamma = abi::sketchGamma(headDim);
  for (size_t c = 0; c < lo.size(); ++c) {
    Value step = e.fmul(e.fsub(hi[c], lo[c]), constLike(e, lo[c], invL));
    Value alo = fabs(e, lo[c]), ahi = fabs(e, hi[c]);
    // e_c, m_c = |lo_c| + 4 * 2^bits * step_c, then e_c + gamma m_c
    // (Sketch.h).
    Value err = e.fma(
        step, constLike(e, step, kSketchStepSlack),
        e.fmul(e.fadd(alo, ahi), constLike(e, step, kSketchMagnitudeSlack)));
    Value mag =
        e.fma(step, constLike(e, step, abi::sketchStepWeight(bits)), alo);
    row.lo.push_back(lo[c]);
    row.step.push_back(step);
    row.slack.push_back(e.fma(mag, constLike(e, mag, gamma), err));
  }
  return row;
}

Value mlir::condensate::sketchSlack(Emitter &e, const TargetInfo &target,
                                    ArrayRef<Value> q, const SketchRow &row,
                                    int64_t lanes) {
  Value acc;
  for (size_t c = 0; c < q.size(); ++c) {
    Value t = e.fmul(fabs(e, q[c]), row.slack[c]);
    acc = c == 0 ? t : e.fadd(acc, t);
  }
  return laneSum(e, target, e.reduceAdd(acc), lanes);
}

SmallVector<Value> mlir::condensate::sketchKeys(Emitter &e,
                                                const SketchRow &row,
                                                ArrayRef<Value> words,
                                                Value shift, int64_t bits) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  SmallVector<Value> keys;
  for (size_t c = 0; c < words.size(); ++c) {
    Value w = words[c];
    auto vt = dyn_cast<VectorType>(w.getType());
    Type i32 = b.getI32Type();
    Type intType = vt ? Type(VectorType::get(vt.getShape(), i32)) : i32;
    Value bitsOf = arith::BitcastOp::create(b, loc, intType, w);
    Value s = vt ? e.splat(shift, vt.getNumElements()) : shift;
    Value mask = constLike(e, bitsOf, levels(bits));
    Value code = e.band(arith::ShRUIOp::create(b, loc, bitsOf, s), mask);
    Type fType = vt ? Type(VectorType::get(vt.getShape(), b.getF32Type()))
                    : b.getF32Type();
    // The code as a float without a conversion (a quarter-rate instruction
    // on the GPU): 2^23 + code has the code in its low mantissa bits, and
    // the subtraction is exact.
    Value biased = arith::BitcastOp::create(
        b, loc, fType, e.bor(code, constLike(e, code, 0x4B000000)));
    Value codeF = e.fsub(biased, constLike(e, biased, 8388608.0));
    keys.push_back(e.fma(codeF, row.step[c], row.lo[c]));
  }
  return keys;
}

Value mlir::condensate::sketchBiasedCode(Emitter &e, Value words, int64_t shift,
                                         int64_t bits) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  // The code's bits moved to [23 - bits, 23): the top of the mantissa.
  int64_t top = 23 - bits;
  Value moved = words;
  if (shift < top)
    moved = arith::ShLIOp::create(b, loc, words,
                                  constLike(e, words, double(top - shift)));
  else if (shift > top)
    moved = arith::ShRUIOp::create(b, loc, words,
                                   constLike(e, words, double(shift - top)));
  Value code =
      e.band(moved, constLike(e, words, levels(bits) * double(1 << top)));
  Value one = e.bor(code, constLike(e, words, double(0x3F800000)));
  auto vt = dyn_cast<VectorType>(words.getType());
  Type fType = vt ? Type(VectorType::get(vt.getShape(), b.getF32Type()))
                  : b.getF32Type();
  return arith::BitcastOp::create(b, loc, fType, one);
}

std::pair<Value, Value> mlir::condensate::sketchSlot(Emitter &e, Value off,
                                                     int64_t bits) {
  int64_t perWord = abi::codesPerWord(bits);
  Value rowIdx = e.add(e.idx(abi::kSketchRow0), e.divs(off, e.idx(perWord)));
  Value shift = e.toI32(e.mul(e.rems(off, e.idx(perWord)), e.idx(bits)));
  return {rowIdx, shift};
}
