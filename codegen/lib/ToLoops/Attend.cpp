//===- Attend.cpp - sparse and dense attention as loops -------------------===//
//
// Lowers sparse_attend (the virtual condensate list) and dense_attend
// (every position) to online-softmax loops, one partial per split.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

/// Online-softmax state of one query head: running max, sum, count and the
/// unnormalised output row.
struct Softmax {
  static SmallVector<Value> init(Emitter &e, RowOps &row) {
    SmallVector<Value> s{e.negInf(), e.f32(0.0), e.f32(0.0)};
    s.append(row.zeros());
    return s;
  }
  /// Folds position (page, off) of key/value head g into `state`.
  static SmallVector<Value> update(Emitter &e, RowOps &row, ValueRange state,
                                   ArrayRef<Value> q, Value k, Value v,
                                   Value page, Value g, Value off,
                                   Value scale) {
    Value logit = e.fmul(row.dot(q, k, {page, g, off}), scale);
    Value m = state[0], l = state[1], c = state[2];
    Value mNew = e.fmax(m, logit);
    Value corr = e.exp(e.fsub(m, mNew));
    Value p = e.exp(e.fsub(logit, mNew));
    SmallVector<Value> out{mNew, e.fadd(e.fmul(l, corr), p),
                           e.fadd(c, e.f32(1.0))};
    SmallVector<Value> vrow = row.loadRow(v, {page, g, off});
    Value corrV = row.splat(corr), pV = row.splat(p);
    for (int64_t i = 0; i < row.chunks(); ++i)
      out.push_back(e.fma(vrow[i], pV, e.fmul(state[3 + i], corrV)));
    return out;
  }
  static void store(Emitter &e, RowOps &row, ValueRange state, Value po,
                    Value pml, Value b, Value h, Value s) {
    e.store(state[0], pml, {b, h, s, e.idx(0)});
    e.store(state[1], pml, {b, h, s, e.idx(1)});
    e.store(state[2], pml, {b, h, s, e.idx(2)});
    row.storeRow(SmallVector<Value>(state.drop_front(3)), po, {b, h, s});
  }
};

void lowerSparseAttend(SparseAttendOp op, Emitter &e,
                       PatternRewriter &rewriter) {
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
  int64_t group = hq / hkv;
  SparseList list = SparseList::of(op);
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0);
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    Value w = effectiveWindow(e, op.getWindows(), b, op.getWindow(),
                              op.getWindowMax());
    CondensateSlots slotsInfo = CondensateSlots::of(e, op, list, w, n);
    e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
      RowOps row{e, d};
      Value g = e.divs(h, e.idx(group));
      SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
      Value limit = list.limit(e, op.getLimits(), b, g);
      Value skipped;
      if (op.getSkip())
        skipped = e.ne(e.load(op.getSkip(), {b, g}), e.i32(0));
      e.forEach(e.idx(0), e.idx(list.splits), [&](Emitter &e, Value s) {
        RowOps row{e, d};
        auto [v0, v1] = list.splitRange(e, s);
        // With a limit the slots past the units attended hold nothing:
        // each split stops there (open extras leave most of a list's slots
        // past the limit), walking the same slots in the same order.
        if (op.getLimits()) {
          Value used = e.add(e.idx(list.forced), e.mul(e.maxs(limit, e.idx(0)),
                                                       e.idx(list.unitTokens)));
          v1 = e.maxs(e.mins(v1, used), v0);
        }
        if (skipped)
          v1 = e.select(skipped, v0, v1);
        SmallVector<Value> init = Softmax::init(e, row);
        auto state = e.forLoop(
            v0, v1, e.idx(1), init,
            [&](Emitter &e, Value v, ValueRange st) -> SmallVector<Value> {
              RowOps row{e, d};
              auto [t, valid] =
                  slotsInfo.position(e, v, list, op.getIndices(), b, g, limit);
              Value pos = t;
              return e.ifElse(
                  valid, ValueRange(st).getTypes(),
                  [&](Emitter &e) -> SmallVector<Value> {
                    RowOps row{e, d};
                    Value page = e.loadIndex(op.getPageTable(),
                                             {b, e.divs(pos, e.idx(p))});
                    Value off = e.rems(pos, e.idx(p));
                    return Softmax::update(e, row, st, q, op.getKCache(),
                                           op.getVCache(), page, g, off, scale);
                  },
                  [&](Emitter &) -> SmallVector<Value> {
                    return SmallVector<Value>(st);
                  });
            });
        Softmax::store(e, row, state, op.getPartialO(), op.getPartialMl(), b, h,
                       s);
      });
    });
  });
}

void lowerDenseAttend(DenseAttendOp op, Emitter &e, PatternRewriter &rewriter) {
  int64_t hq = staticDim(op.getQ(), 1), d = staticDim(op.getQ(), 2);
  int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
  int64_t group = hq / hkv;
  Value scale = e.f32(op.getScale().convertToDouble());
  Value batch = e.dim(op.getQ(), 0);
  Value splits = e.dim(op.getPartialMl(), 2);
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    Value n = e.loadIndex(op.getLens(), {b});
    e.forEach(e.idx(0), e.idx(hq), [&](Emitter &e, Value h) {
      RowOps row{e, d};
      Value g = e.divs(h, e.idx(group));
      Value active = e.i1(true);
      if (op.getMask())
        active = e.ne(e.load(op.getMask(), {b, g}), e.i32(0));
      SmallVector<Value> q = row.loadRow(op.getQ(), {b, h});
      e.forEach(e.idx(0), splits, [&](Emitter &e, Value s) {
        RowOps row{e, d};
        auto [t0, t1] = denseSplitRange(e, n, splits, s);
        t1 = e.select(active, t1, t0);
        auto state = e.forLoop(
            t0, t1, e.idx(1), Softmax::init(e, row),
            [&](Emitter &e, Value t, ValueRange st) -> SmallVector<Value> {
              RowOps row{e, d};
              Value page =
                  e.loadIndex(op.getPageTable(), {b, e.divs(t, e.idx(p))});
              Value off = e.rems(t, e.idx(p));
              return Softmax::update(e, row, st, q, op.getKCache(),
                                     op.getVCache(), page, g, off, scale);
            });
        Softmax::store(e, row, state, op.getPartialO(), op.getPartialMl(), b, h,
                       s);
      });
    });
  });
}

} // namespace

void mlir::condensate::populateAttendToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<SparseAttendOp, lowerSparseAttend>>(
      patterns.getContext());
  patterns.add<LoopPattern<DenseAttendOp, lowerDenseAttend>>(
      patterns.getContext());
}
