//===- Append.cpp - the KV append kernel ----------------------------------===//
//
// Lowers append_kv to one block per sequence, threads over (kv head,
// channel).
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
        Value bb = e.bid(gpu::Dimension::x);
        AppendSlot slot = appendSlot(e, a[5], a[4], bb, p);
        Value summaries = hasSummaries ? a[6] : Value();
        e.forLoop(e.tid(), e.idx(hkv * d), e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    Value g = e.divs(i, e.idx(d)), c = e.rems(i, e.idx(d));
                    appendChannel(e, slot, a[0], a[1], a[2], a[3], summaries,
                                  bb, g, c, sketchBits);
                    return {};
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
