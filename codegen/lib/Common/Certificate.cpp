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

Value mlir::condensate::unitMassBound(Emitter &e, const TargetInfo &target,
                                      Value cnt, Value bound, Value m) {
  Type f64 = e.builder().getF64Type();
  Value margin =
      e.fmul(e.fadd(e.f32(1.0),
                    math::AbsFOp::create(e.builder(), e.location(), bound)),
             e.f32(kBoundMargin));
  Value x = e.fsub(e.fadd(bound, margin), m);
  Value term;
  if (target.f64Exp()) {
    x = e.extf(x, f64);
    // The product with 1 changes nothing; it stays so that the emitted code
    // stays byte-identical.
    Value mass = e.fmul(e.indexToF32(cnt), e.f32(1.0));
    term = e.fmul(e.extf(mass, f64), e.exp(x));
  } else {
    term = e.fmul(e.indexToF32(cnt), e.exp(x));
  }
  return e.select(e.gt(cnt, e.idx(0)), e.extf(term, f64), e.f64(0.0));
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
    term = e.fmul(e.extf(e.indexToF32(cnt), f64), e.exp(e.extf(x, f64)));
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
  return {walk[0], walk[2]};
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
