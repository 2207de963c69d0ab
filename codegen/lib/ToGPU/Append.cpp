//===- Append.cpp - the KV append kernel ----------------------------------===//
//
// Lowers append_kv to one block per row, threads over (kv head, channel);
// the block of a page's first row appends all of that page's rows.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

#include "../Common/Numerics.h"
#include "KernelBuilder.h"

using namespace mlir;
using namespace mlir::condensate;
using namespace mlir::condensate::kernel;

namespace {

void lowerAppendKV(AppendKVOp op, OpBuilder &b, const KernelBuilder &kb,
                   StringRef name) {
  Location loc = op.getLoc();
  int64_t hkv = staticDim(op.getKCache(), 1), p = staticDim(op.getKCache(), 2);
  int64_t d = staticDim(op.getKCache(), 3);
  const int64_t threads = 128;
  SmallVector<Value> operands{op.getKNew(),      op.getVNew(),
                              op.getKCache(),    op.getVCache(),
                              op.getPageTable(), op.getPositions()};
  if (op.getSummaries())
    operands.push_back(op.getSummaries());
  bool hasSummaries = static_cast<bool>(op.getSummaries());
  int64_t sketchBits = op.getSketchBits();
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        // Rows that land in one page are consecutive (append_kv's contract):
        // the block of the first of them appends them all, in order, so a
        // page's summaries and sketch fold its tokens in position order
        // with no race; the blocks of the others have nothing to do. Each
        // thread keeps its channels from row to row, so it reads back only
        // what it wrote itself.
        Value bb = e.bid(gpu::Dimension::x), tid = e.tid();
        Value batch = e.dim(a[0], 0);
        AppendSlot lead = appendSlot(e, a[5], a[4], bb, p);
        Value prev =
            appendSlot(e, a[5], a[4], e.maxs(e.sub(bb, e.idx(1)), e.idx(0)), p)
                .page;
        Value isLead = e.bor(e.eq(bb, e.idx(0)), e.ne(prev, lead.page));
        Value summaries = hasSummaries ? a[6] : Value();
        e.ifThen(isLead, [&](Emitter &e) {
          Value rows = e.mins(e.sub(e.idx(p), lead.off), e.sub(batch, bb));
          e.forEach(e.idx(0), rows, [&](Emitter &e, Value j) {
            Value r = e.add(bb, j);
            AppendSlot slot = appendSlot(e, a[5], a[4], r, p);
            e.ifThen(e.eq(slot.page, lead.page), [&](Emitter &e) {
              e.forLoop(
                  tid, e.idx(hkv * d), e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    Value g = e.divs(i, e.idx(d)), c = e.rems(i, e.idx(d));
                    appendChannel(e, slot, a[0], a[1], a[2], a[3], summaries, r,
                                  g, c, sketchBits);
                    return {};
                  });
            });
          });
        });
      });
  Value batch = memref::DimOp::create(b, loc, op.getKNew(), 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  launch(b, loc, fn, batch, one, one, threads, operands);
}

} // namespace

void mlir::condensate::populateAppendToGPUPatterns(RewritePatternSet &patterns,
                                                   gpu::GPUModuleOp kernels) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<KernelPattern<AppendKVOp, lowerAppendKV>>(ctx, kernels,
                                                         "append_kv");
}
