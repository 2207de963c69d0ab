//===- Append.cpp - KV append as loops ------------------------------------===//
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

void lowerAppendKV(AppendKVOp op, Emitter &e, PatternRewriter &rewriter) {
  int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
  int64_t d = staticDim(op.getKCache(), 3);
  Value batch = e.dim(op.getKNew(), 0);
  e.forEach(e.idx(0), batch, [&](Emitter &e, Value b) {
    AppendSlot slot = appendSlot(e, op.getPositions(), op.getPageTable(), b, p);
    e.forEach(e.idx(0), e.idx(hkv), [&](Emitter &e, Value g) {
      e.forEach(e.idx(0), e.idx(d), [&](Emitter &e, Value c) {
        appendChannel(e, slot, op.getKNew(), op.getVNew(), op.getKCache(),
                      op.getVCache(), op.getSummaries(), b, g, c,
                      op.getSketchBits());
      });
    });
  });
}

} // namespace

void mlir::condensate::populateAppendToLoopsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<LoopPattern<AppendKVOp, lowerAppendKV>>(patterns.getContext());
}
