//===- Certificate.cpp - the certificate's formulas, written once ---------===//
//
// Implements Certificate.h for both lowerings.
//
//===----------------------------------------------------------------------===//
#include "Certificate.h"

#include "Numerics.h"

#include <limits>

using namespace mlir;
using namespace mlir::condensate;

namespace {

/// exp(x) for an f64 x or a vector of them, in arithmetic (a libm call a
/// unit was most of the CPU certificate's time): x = k ln 2 + r with k =
/// round(x log2 e) and ln 2 in fdlibm's two parts (k ln2_hi exact), e^r by
/// its Taylor series to r^13 (|r| <= 0.35: remainder below 6e-18
/// relative), times 2^k as 2^(k >> 1) * 2^(k - (k >> 1)) from exponent bits,
/// both factors normal for every k in [-1076, 1024], so that subnormal
/// results and the overflow to +inf come out of the products. x is clamped
/// to [-746, 710] first (e^-746 rounds to 0, e^710 overflows); NaN stays
/// NaN. A few ulps from exp: the certificate's margin kBoundMargin is
/// eleven orders of magnitude larger.
Value expF64(Emitter &e, Value x) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  auto vt = dyn_cast<VectorType>(x.getType());
  auto like = [&](Value scalar) {
    return vt ? e.splat(scalar, vt.getNumElements()) : scalar;
  };
  auto c = [&](double v) { return like(e.f64(v)); };
  auto ic = [&](int64_t v) {
    return like(arith::ConstantIntOp::create(b, loc, v, 64));
  };
  Type i64 = vt ? Type(VectorType::get(vt.getShape(), b.getI64Type()))
                : Type(b.getI64Type());
  Value xc = e.fmin(e.fmax(x, c(-746.0)), c(710.0));
  Value k =
      math::FloorOp::create(b, loc, e.fma(xc, c(1.4426950408889634), c(0.5)));
  Value r = e.fsub(e.fsub(xc, e.fmul(k, c(6.93147180369123816490e-01))),
                   e.fmul(k, c(1.90821492927058770002e-10)));
  double coef[14];
  coef[0] = 1.0;
  for (int i = 1; i < 14; ++i)
    coef[i] = coef[i - 1] / double(i);
  Value y = c(coef[13]);
  for (int i = 12; i >= 0; --i)
    y = e.fma(y, r, c(coef[i]));
  Value ki = arith::FPToSIOp::create(b, loc, i64, k);
  Value k1 = arith::ShRSIOp::create(b, loc, ki, ic(1));
  auto pow2 = [&](Value kk) {
    Value bits = arith::ShLIOp::create(b, loc, e.add(kk, ic(1023)), ic(52));
    return arith::BitcastOp::create(b, loc, x.getType(), bits);
  };
  Value out = e.fmul(e.fmul(y, pow2(k1)), pow2(e.sub(ki, k1)));
  return e.select(e.fcmp(arith::CmpFPredicate::UNO, x, x), x, out);
}

/// The exponent of a unit's mass bound, bound + margin - m, for f32 scalars
/// or for `bound` a vector of them (m is splat).
Value massBoundExponent(Emitter &e, Value bound, Value m) {
  auto vt = dyn_cast<VectorType>(bound.getType());
  auto c = [&](double v) {
    Value s = e.f32(v);
    return vt ? e.splat(s, vt.getNumElements()) : s;
  };
  if (vt)
    m = e.splat(m, vt.getNumElements());
  Value margin = e.fmul(
      e.fadd(c(1.0), math::AbsFOp::create(e.builder(), e.location(), bound)),
      c(kBoundMargin));
  return e.fsub(e.fadd(bound, margin), m);
}

} // namespace

Value mlir::condensate::unitMassBound(Emitter &e, const TargetInfo &target,
                                      Value cnt, Value bound, Value m) {
  Type f64 = e.builder().getF64Type();
  Value x = massBoundExponent(e, bound, m);
  Value term;
  if (target.f64Exp())
    term = e.fmul(e.extf(e.indexToF32(cnt), f64), expF64(e, e.extf(x, f64)));
  else
    term = e.fmul(e.indexToF32(cnt), e.exp(x));
  return e.select(e.gt(cnt, e.idx(0)), e.extf(term, f64), e.f64(0.0));
}

Value mlir::condensate::unitMassBoundLanes(Emitter &e, const TargetInfo &target,
                                           Value counts, Value bounds,
                                           Value m) {
  assert(target.f64Exp() && "the lanes form is the f64 formula's");
  (void)target;
  auto vt = cast<VectorType>(counts.getType());
  Type f64 = VectorType::get(vt.getShape(), e.builder().getF64Type());
  Value x = massBoundExponent(e, bounds, m);
  Value term = e.fmul(e.extf(counts, f64), expF64(e, e.extf(x, f64)));
  Value zeros = e.splat(e.f32(0.0), vt.getNumElements());
  return e.select(e.fcmp(arith::CmpFPredicate::OGT, counts, zeros), term,
                  e.splat(e.f64(0.0), vt.getNumElements()));
}

Value mlir::condensate::unitLowerMass(Emitter &e, const TargetInfo &target,
                                      Value cnt, Value bound, Value width,
                                      Value m) {
  Type f64 = e.builder().getF64Type();
  auto abs = [&](Value x) {
    return math::AbsFOp::create(e.builder(), e.location(), x);
  };
  Value size = e.fadd(e.fadd(e.fadd(e.f32(1.0), abs(bound)), width), abs(m));
  Value margin = e.fmul(size, e.f32(kBoundMargin));
  Value x = e.fsub(e.fsub(e.fsub(bound, width), margin), m);
  Value term;
  if (target.f64Exp())
    term = e.fmul(e.extf(e.indexToF32(cnt), f64), expF64(e, e.extf(x, f64)));
  else
    term = e.extf(e.fmul(e.indexToF32(cnt), e.exp(x)), f64);
  // Below +inf and not NaN (an ordered comparison is false for NaN).
  Value finite = e.fcmp(arith::CmpFPredicate::OLT, term,
                        e.f64(std::numeric_limits<double>::infinity()));
  return e.select(e.band(e.gt(cnt, e.idx(0)), finite), term, e.f64(0.0));
}

Value mlir::condensate::epsHat(Emitter &e, const TargetInfo &target, Value u,
                               Value z) {
  Value denom = e.fadd(z, u);
  Value eps;
  if (target.formulaOrder() == FormulaOrder::Loops) {
    Value pos = e.fcmp(arith::CmpFPredicate::OGT, denom, e.f64(0.0));
    eps = e.select(pos, e.fdiv(u, denom), e.f64(0.0));
  } else {
    eps = e.select(e.fcmp(arith::CmpFPredicate::OGT, denom, e.f64(0.0)),
                   e.fdiv(u, denom), e.f64(0.0));
  }
  Value finite = e.fcmp(arith::CmpFPredicate::OLE, eps, e.f64(1.0));
  return e.select(finite, eps, e.f64(1.0));
}

Value mlir::condensate::worstEpsHat(Emitter &e, const TargetInfo &target,
                                    ValueRange us, ValueRange zs) {
  Value m = e.f64(0.0);
  for (size_t i = 0; i < us.size(); ++i)
    m = e.fmax(m, epsHat(e, target, us[i], zs[i]));
  return m;
}

ExtrasWalk mlir::condensate::walkExtras(Emitter &e, const TargetInfo &target,
                                        Value indices, Value b, Value g,
                                        int64_t base, int64_t extraMax,
                                        double tau, ValueRange us,
                                        ValueRange zs, UnitMassFn mass,
                                        UnitMassFn lowerMass) {
  return walkExtrasFrom(e, target, indices, b, g, base, e.idx(0),
                        e.idx(extraMax), tau, us, zs, mass, lowerMass);
}

ExtrasWalk mlir::condensate::walkExtrasFrom(
    Emitter &e, const TargetInfo &target, Value indices, Value b, Value g,
    int64_t base, Value from, Value to, double tau, ValueRange us,
    ValueRange zs, UnitMassFn mass, UnitMassFn lowerMass) {
  int64_t group = us.size();
  Value over = e.fcmp(arith::CmpFPredicate::OGT, worstEpsHat(e, target, us, zs),
                      e.f64(tau));
  // State: (done, next slot, extras taken, omitted sums[, attended sums]).
  // The walk stops at tau, at the first empty slot (select_topk puts every
  // empty slot after the units), or at `to`: with open extras (max_extra as
  // large as the context) it costs what it takes in, not the slots.
  SmallVector<Value> init{e.bnot(over), from, from};
  init.append(us.begin(), us.end());
  if (lowerMass)
    init.append(zs.begin(), zs.end());
  auto walk = e.whileLoop(
      init,
      [&](Emitter &e, ValueRange st) {
        return e.band(e.bnot(st[0]), e.lt(st[1], to));
      },
      [&](Emitter &e, ValueRange st) -> SmallVector<Value> {
        Value j = st[1];
        Value u = e.loadIndex(indices, {b, g, e.add(j, e.idx(base))});
        Value have = e.ge(u, e.idx(0));
        Value uSafe = e.select(have, u, e.idx(0));
        SmallVector<Value> next, nextZ(zs.begin(), zs.end());
        for (int64_t i = 0; i < group; ++i) {
          Value m = e.select(have, mass(e, uSafe, i), e.f64(0.0));
          next.push_back(e.fmax(e.fsub(st[3 + i], m), e.f64(0.0)));
          if (lowerMass)
            nextZ[i] =
                e.fadd(st[3 + group + i],
                       e.select(have, lowerMass(e, uSafe, i), e.f64(0.0)));
        }
        Value ok = e.fcmp(arith::CmpFPredicate::OLE,
                          worstEpsHat(e, target, next, nextZ), e.f64(tau));
        Value nextSlot = e.select(have, e.add(j, e.idx(1)), to);
        SmallVector<Value> out{e.band(ok, have), nextSlot,
                               e.select(have, e.add(j, e.idx(1)), st[2])};
        out.append(next.begin(), next.end());
        if (lowerMass)
          out.append(nextZ.begin(), nextZ.end());
        return out;
      });
  ExtrasWalk out{walk[0], walk[2], SmallVector<Value>(zs.begin(), zs.end())};
  if (lowerMass)
    for (int64_t i = 0; i < group; ++i)
      out.zs[size_t(i)] = walk[3 + group + i];
  return out;
}

Value mlir::condensate::ranksAfter(Emitter &e, const SelectionEnd &end,
                                   Value key, Value u) {
  Value below = e.cmp(arith::CmpIPredicate::ult, key, end.key);
  Value tieAfter = e.band(e.eq(key, end.key), e.gt(u, end.unit));
  return e.band(end.full, e.bor(below, tieAfter));
}

Value mlir::condensate::reportedEpsHat(Emitter &e, Value eps, Value fallback) {
  eps = e.truncf(eps, e.builder().getF32Type());
  eps = e.fmul(eps, e.f32(::condensate::abi::kEpsHatRoundUp));
  return e.select(fallback, e.f32(0.0), eps);
}
