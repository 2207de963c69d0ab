//===- Emitter.h - terse IR construction for kernel lowerings ---*- C++ -*-===//
//
// A thin wrapper over OpBuilder used by the loop and GPU lowerings: index and
// float arithmetic, vectors, structured loops and conditionals with lambdas.
// What the IR computes (the condensate numerics) is in Numerics.h and
// Certificate.h; what a target offers is in TargetInfo.h.
//
//===----------------------------------------------------------------------===//
#ifndef CONDENSATE_CODEGEN_COMMON_EMITTER_H
#define CONDENSATE_CODEGEN_COMMON_EMITTER_H

#include "condensate/Dialect/CondensateDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <functional>
#include <limits>
#include <memory>

namespace mlir::condensate {

/// Static size of dimension i of memref value v.
inline int64_t staticDim(Value v, int64_t i) {
  return cast<MemRefType>(v.getType()).getDimSize(i);
}

class Emitter {
public:
  Emitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  virtual ~Emitter() = default;
  /// An emitter of the same kind for a nested region (derived emitters
  /// override this so callbacks receive their own type).
  virtual std::unique_ptr<Emitter> nested(OpBuilder &nb, Location nloc) const {
    return std::make_unique<Emitter>(nb, nloc);
  }

  OpBuilder &builder() { return b; }
  Location location() const { return loc; }
  MLIRContext *ctx() { return b.getContext(); }

  //===--------------------------------------------------------------------===//
  // Constants
  //===--------------------------------------------------------------------===//
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value f64(double v) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  }
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); }
  Value i1(bool v) { return arith::ConstantIntOp::create(b, loc, v, 1); }
  Value negInf() { return f32(-std::numeric_limits<double>::infinity()); }
  Value nan() { return f32(std::numeric_limits<double>::quiet_NaN()); }

  //===--------------------------------------------------------------------===//
  // Index arithmetic
  //===--------------------------------------------------------------------===//
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value divs(Value x, Value y) { return arith::DivSIOp::create(b, loc, x, y); }
  Value rems(Value x, Value y) { return arith::RemSIOp::create(b, loc, x, y); }
  Value ceilDiv(Value x, Value y) {
    return arith::CeilDivSIOp::create(b, loc, x, y);
  }
  Value mins(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value maxs(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value lt(Value x, Value y) { return cmp(arith::CmpIPredicate::slt, x, y); }
  Value le(Value x, Value y) { return cmp(arith::CmpIPredicate::sle, x, y); }
  Value ge(Value x, Value y) { return cmp(arith::CmpIPredicate::sge, x, y); }
  Value gt(Value x, Value y) { return cmp(arith::CmpIPredicate::sgt, x, y); }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value ne(Value x, Value y) { return cmp(arith::CmpIPredicate::ne, x, y); }
  Value band(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value bor(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value bxor(Value x, Value y) { return arith::XOrIOp::create(b, loc, x, y); }
  Value bnot(Value x) { return bxor(x, i1(true)); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value toIndex(Value v) {
    if (v.getType().isIndex())
      return v;
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  Value toI32(Value v) {
    if (v.getType().isInteger(32))
      return v;
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  }
  /// The index value of `v`: `v` itself, or a constant for an attribute.
  Value index(OpFoldResult v) {
    if (auto a = dyn_cast<Attribute>(v))
      return idx(cast<IntegerAttr>(a).getInt());
    return cast<Value>(v);
  }
  Value indexToF32(Value v) {
    Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
    return arith::SIToFPOp::create(b, loc, b.getF32Type(), i);
  }

  //===--------------------------------------------------------------------===//
  // Float arithmetic
  //===--------------------------------------------------------------------===//
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fdiv(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value fmax(Value x, Value y) {
    return arith::MaximumFOp::create(b, loc, x, y);
  }
  Value fmin(Value x, Value y) {
    return arith::MinimumFOp::create(b, loc, x, y);
  }
  Value fma(Value x, Value y, Value z) {
    return math::FmaOp::create(b, loc, x, y, z);
  }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value fcmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value extf(Value v, Type to) {
    if (v.getType() == to)
      return v;
    return arith::ExtFOp::create(b, loc, to, v);
  }
  Value truncf(Value v, Type to) {
    if (v.getType() == to)
      return v;
    return arith::TruncFOp::create(b, loc, to, v);
  }
  /// Converts a value of element type f32/f16/bf16 (or a vector of one) to
  /// the f32 form of the same shape.
  Value toF32(Value v) {
    Type t = v.getType();
    Type f32t = b.getF32Type();
    if (auto vt = dyn_cast<VectorType>(t))
      return extf(v, VectorType::get(vt.getShape(), f32t));
    return extf(v, f32t);
  }

  //===--------------------------------------------------------------------===//
  // Vectors
  //===--------------------------------------------------------------------===//
  /// A vector of `n` copies of `scalar`.
  Value splat(Value scalar, int64_t n) {
    return vector::BroadcastOp::create(
        b, loc, VectorType::get({n}, scalar.getType()), scalar);
  }
  /// Sum of the elements of `vec`, in any order.
  Value reduceAdd(Value vec) {
    return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, vec,
                                       arith::FastMathFlags::reassoc);
  }

  //===--------------------------------------------------------------------===//
  // Memory
  //===--------------------------------------------------------------------===//
  Value load(Value mem, ValueRange ivs) {
    return memref::LoadOp::create(b, loc, mem, ivs);
  }
  void store(Value v, Value mem, ValueRange ivs) {
    memref::StoreOp::create(b, loc, v, mem, ivs);
  }
  Value loadIndex(Value mem, ValueRange ivs) { return toIndex(load(mem, ivs)); }
  Value dim(Value mem, int64_t i) {
    return memref::DimOp::create(b, loc, mem, i);
  }

  //===--------------------------------------------------------------------===//
  // Structured control flow
  //===--------------------------------------------------------------------===//
  using LoopBody =
      std::function<SmallVector<Value>(Emitter &, Value, ValueRange)>;
  using Region = std::function<SmallVector<Value>(Emitter &)>;

  /// scf.for from lb to ub by step carrying `inits`; returns the results.
  SmallVector<Value> forLoop(Value lb, Value ub, Value step, ValueRange inits,
                             const LoopBody &body) {
    auto loop = scf::ForOp::create(
        b, loc, lb, ub, step, inits,
        [&](OpBuilder &nb, Location nloc, Value iv, ValueRange args) {
          auto inner = nested(nb, nloc);
          SmallVector<Value> yielded = body(*inner, iv, args);
          scf::YieldOp::create(nb, nloc, yielded);
        });
    return SmallVector<Value>(loop.getResults());
  }
  /// scf.while carrying `inits`: `cond` decides on the carried values
  /// whether `body` runs again; returns the values when it stops.
  SmallVector<Value> whileLoop(
      ValueRange inits, const std::function<Value(Emitter &, ValueRange)> &cond,
      const std::function<SmallVector<Value>(Emitter &, ValueRange)> &body) {
    auto loop = scf::WhileOp::create(
        b, loc, inits.getTypes(), inits,
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          auto inner = nested(nb, nloc);
          scf::ConditionOp::create(nb, nloc, cond(*inner, args), args);
        },
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          auto inner = nested(nb, nloc);
          scf::YieldOp::create(nb, nloc, body(*inner, args));
        });
    return SmallVector<Value>(loop.getResults());
  }
  /// scf.for without carried values.
  void forEach(Value lb, Value ub,
               const std::function<void(Emitter &, Value)> &body) {
    forLoop(lb, ub, idx(1), {}, [&](Emitter &e, Value iv, ValueRange) {
      body(e, iv);
      return SmallVector<Value>();
    });
  }
  /// scf.if with results of `types`.
  SmallVector<Value> ifElse(Value cond, TypeRange types, const Region &then,
                            const Region &otherwise) {
    auto op = scf::IfOp::create(
        b, loc, cond,
        [&](OpBuilder &nb, Location nloc) {
          auto inner = nested(nb, nloc);
          scf::YieldOp::create(nb, nloc, then(*inner));
        },
        [&](OpBuilder &nb, Location nloc) {
          auto inner = nested(nb, nloc);
          scf::YieldOp::create(nb, nloc, otherwise(*inner));
        });
    (void)types;
    return SmallVector<Value>(op.getResults());
  }
  /// scf.if without results.
  void ifThen(Value cond, const std::function<void(Emitter &)> &then) {
    scf::IfOp::create(b, loc, cond, [&](OpBuilder &nb, Location nloc) {
      auto inner = nested(nb, nloc);
      then(*inner);
      scf::YieldOp::create(nb, nloc);
    });
  }

private:
  OpBuilder &b;
  Location loc;
};

} // namespace mlir::condensate

#endif // CONDENSATE_CODEGEN_COMMON_EMITTER_H
