//===- Append.cpp - KV append as loops ----------------------------------===//
//
// Lowers append_kv: the new key and value rows stored at each sequence's
// position, with the page's summaries folded in.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"

#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::loops;

namespace {

struct LowerAppendKV : OpRewritePattern<AppendKVOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AppendKVOp op,
                                PatternRewriter &rewriter) const override {
    Emitter e(rewriter, op.getLoc());
    int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
    int64_t d = staticDim(op.getKCache(), 3);
    Type kvElt = op.getKCache().getType().getElementType();
    Value batch = e.dim(op.getKNew(), 0);
    Value summaries = op.getSummaries();
    e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
      Value pos = e.loadIndex(op.getPositions(), {b});
      Value page = e.loadIndex(op.getPageTable(), {b, e.divs(pos, e.idx(p))});
      Value off = e.rems(pos, e.idx(p));
      Value first = e.eq(off, e.idx(0));
      e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
        e.forEach(e.idx(0), e.idx(d), [&](Emitter &e, Value c) {
          Value k = e.truncf(e.load(op.getKNew(), {b, g, c}), kvElt);
          Value v = e.truncf(e.load(op.getVNew(), {b, g, c}), kvElt);
          e.store(k, op.getKCache(), {page, g, off, c});
          e.store(v, op.getVCache(), {page, g, off, c});
          if (!summaries)
            return;
          Value k32 = e.toF32(k), v32 = e.toF32(v);
          auto slot = [&](SummarySlot s) { return e.idx(s); };
          auto update = [&](SummarySlot s, Value x,
                            std::function<Value(Value, Value)> fold) {
            Value old = e.load(summaries, {page, g, slot(s), c});
            e.store(e.select(first, x, fold(old, x)), summaries,
                    {page, g, slot(s), c});
          };
          update(KMin, k32, [&](Value a, Value x) { return e.fmin(a, x); });
          update(KMax, k32, [&](Value a, Value x) { return e.fmax(a, x); });
          update(KSum, k32, [&](Value a, Value x) { return e.fadd(a, x); });
          update(VMin, v32, [&](Value a, Value x) { return e.fmin(a, x); });
          update(VMax, v32, [&](Value a, Value x) { return e.fmax(a, x); });
        });
      });
    });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::condensate::populateAppendToLoopsPatterns(RewritePatternSet &patterns) {
  patterns.add<LowerAppendKV>(patterns.getContext());
}
