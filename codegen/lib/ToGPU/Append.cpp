//===- Append.cpp - the KV append kernel --------------------------------===//
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
  Type kvElt = elementType(op.getKCache());
  const int64_t threads = 128;
  SmallVector<Value> operands{op.getKNew(),      op.getVNew(),
                              op.getKCache(),    op.getVCache(),
                              op.getPageTable(), op.getPositions()};
  if (op.getSummaries())
    operands.push_back(op.getSummaries());
  bool hasSummaries = static_cast<bool>(op.getSummaries());
  auto fn = kb.createKernel(
      name, operands, {}, [&](GPUEmitter &e, ValueRange a, ValueRange) {
        Value bb = e.bid(gpu::Dimension::x);
        Value pos = e.loadIndex(a[5], {bb});
        Value page = e.loadIndex(a[4], {bb, e.divs(pos, e.idx(p))});
        Value off = e.rems(pos, e.idx(p));
        Value first = e.eq(off, e.idx(0));
        e.forLoop(e.tid(), e.idx(hkv * d), e.idx(threads), {},
                  [&](Emitter &e, Value i, ValueRange) -> SmallVector<Value> {
                    Value g = e.divs(i, e.idx(d)), c = e.rems(i, e.idx(d));
                    Value k = e.truncf(e.load(a[0], {bb, g, c}), kvElt);
                    Value v = e.truncf(e.load(a[1], {bb, g, c}), kvElt);
                    e.store(k, a[2], {page, g, off, c});
                    e.store(v, a[3], {page, g, off, c});
                    if (!hasSummaries)
                      return {};
                    Value s = a[6];
                    Value k32 = e.toF32(k), v32 = e.toF32(v);
                    auto update = [&](SummarySlot slot, Value x,
                                      std::function<Value(Value, Value)> fold) {
                      Value old = e.load(s, {page, g, e.idx(slot), c});
                      e.store(e.select(first, x, fold(old, x)), s,
                              {page, g, e.idx(slot), c});
                    };
                    update(KMin, k32, [&](Value o, Value x) { return e.fmin(o, x); });
                    update(KMax, k32, [&](Value o, Value x) { return e.fmax(o, x); });
                    update(KSum, k32, [&](Value o, Value x) { return e.fadd(o, x); });
                    update(VMin, v32, [&](Value o, Value x) { return e.fmin(o, x); });
                    update(VMax, v32, [&](Value o, Value x) { return e.fmax(o, x); });
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
  patterns.add<KernelPattern<AppendKVOp, lowerAppendKV>>(ctx, kernels, "append_kv");
}
