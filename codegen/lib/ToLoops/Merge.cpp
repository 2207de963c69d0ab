//===- Merge.cpp - merging partials as loops ------------------------------===//
//
// Lowers merge: the splits' partials (sparse, or dense after a fallback)
// combined into the output row, with the stats and the output-error bound.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

/// eps_hat * sqrt(sum_c max(vmax_c - o_c, o_c - vmin_c, 0)^2) for the box
/// vbox[b, g], rounded up so float32 rounding of the sum cannot shrink it.
Value outputBound(Emitter &e, RowOps &row, ArrayRef<Value> o, Value vbox,
                  Value b, Value g, Value epsHat) {
  SmallVector<Value> lo = row.loadRow(vbox, {b, g, e.idx(0)});
  SmallVector<Value> hi = row.loadRow(vbox, {b, g, e.idx(1)});
  Value zero = row.splat(e.f32(0.0));
  Value acc = zero;
  for (int64_t c = 0; c < row.chunks(); ++c) {
    Value far = e.fmax(e.fmax(e.fsub(hi[c], o[c]), e.fsub(o[c], lo[c])), zero);
    acc = e.fma(far, far, acc);
  }
  Value dist =
      math::SqrtOp::create(e.builder(), e.location(), e.reduceAdd(acc));
  return e.fmul(e.fmul(epsHat, dist), e.f32(kOutputBoundRoundUp));
}

void lowerMerge(MergeOp op, Emitter &e, PatternRewriter &rewriter) {
  KVShare share = KVShare::of(e, op);
  int64_t hq = staticDim(op.getOut(), 1), d = staticDim(op.getOut(), 2);
  int64_t group = 1;
  if (op.getFallback())
    group = hq / staticDim(op.getFallback(), 1);
  else if (op.getVbox())
    group = hq / staticDim(op.getVbox(), 1);
  // The share is of the function's kv heads: their number from the pass's
  // note (kKVHeadsAttr), else the groups the op knows.
  int64_t hkv = hq / group;
  if (auto a = op->getAttrOfType<IntegerAttr>(kKVHeadsAttr))
    hkv = a.getInt();
  Value batch = e.dim(op.getOut(), 0);
  // (o, ml, isDense) for every partial set.
  SmallVector<std::tuple<Value, Value, bool>> sets;
  for (size_t i = 0; i < op.getPartials().size(); i += 2)
    sets.push_back({op.getPartials()[i], op.getPartials()[i + 1], false});
  if (!op.getDense().empty())
    sets.push_back({op.getDense()[0], op.getDense()[1], true});
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    share.forEachHead(e, hkv, hq / hkv, [&](Emitter &e, Value h) {
      RowOps row{e, d};
      Value useDense = e.i1(false);
      if (op.getFallback())
        useDense = e.ne(e.load(op.getFallback(), {b, e.divs(h, e.idx(group))}),
                        e.i32(0));
      auto active = [&](Emitter &e, bool dense) {
        return dense ? useDense : e.bnot(useDense);
      };
      // Pass 1: the overall max, and where each set's live splits end.
      Value m = e.negInf();
      SmallVector<Value> liveEnds;
      for (auto &[po, pml, dense] : sets) {
        Value pmlV = pml;
        auto [mSet, end] = liveSplitMax(e, row.target(), pmlV, b, h,
                                        e.builder().getIndexAttr(0));
        m = e.select(active(e, dense), e.fmax(m, mSet), m);
        liveEnds.push_back(e.toIndex(end));
      }
      // Pass 2: weighted sums.
      SmallVector<Value> state{e.f32(0.0), e.f32(0.0)};
      state.append(row.zeros());
      for (auto [set, end] : llvm::zip(sets, liveEnds)) {
        auto &[po, pml, dense] = set;
        Value poV = po, pmlV = pml;
        Value on = active(e, dense);
        state = e.forLoop(
            e.idx(0), end, e.idx(1), state,
            [&](Emitter &e, Value s, ValueRange st) -> SmallVector<Value> {
              RowOps row{e, d};
              Value ms = e.load(pmlV, {b, h, s, e.idx(0)});
              Value ls = e.load(pmlV, {b, h, s, e.idx(1)});
              Value cs = e.load(pmlV, {b, h, s, e.idx(2)});
              Value live =
                  e.band(on, e.fcmp(arith::CmpFPredicate::OGT, ls, e.f32(0.0)));
              Value wgt = e.select(live, e.exp(e.fsub(ms, m)), e.f32(0.0));
              SmallVector<Value> out{
                  e.fadd(st[0], e.fmul(ls, wgt)),
                  e.fadd(st[1], e.select(on, cs, e.f32(0.0)))};
              SmallVector<Value> o = row.loadRow(poV, {b, h, s});
              Value wv = row.splat(wgt);
              for (int64_t c = 0; c < row.chunks(); ++c)
                out.push_back(
                    e.select(live, e.fma(o[c], wv, st[2 + c]), st[2 + c]));
              return out;
            });
      }
      Value total = state[0];
      Value pos = e.fcmp(arith::CmpFPredicate::OGT, total, e.f32(0.0));
      Value inv = e.select(pos, e.fdiv(e.f32(1.0), total), e.f32(0.0));
      SmallVector<Value> outRow;
      Value invV = row.splat(inv);
      for (int64_t c = 0; c < row.chunks(); ++c)
        outRow.push_back(e.fmul(state[2 + c], invV));
      row.storeRow(outRow, op.getOut(), {b, h});
      if (Value stats = op.getStats()) {
        e.store(state[1], stats, {b, h, e.idx(StatAttended)});
        if (auto eps = op.getStatsEpsAttr()) {
          storeFixedCertificate(e, stats, b, h, eps.getValueAsDouble());
        } else if (Value vbox = op.getVbox()) {
          Value bound =
              outputBound(e, row, outRow, vbox, b, e.divs(h, e.idx(group)),
                          e.load(stats, {b, h, e.idx(StatEpsHat)}));
          e.store(e.select(useDense, e.f32(0.0), bound), stats,
                  {b, h, e.idx(StatOutputBound)});
        } else {
          e.store(e.nan(), stats, {b, h, e.idx(StatOutputBound)});
        }
      }
    });
  });
}

} // namespace

void mlir::condensate::populateMergeToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<MergeOp, lowerMerge>>(patterns.getContext());
}
