//===- Specialize.cpp - pin shapes, types and budgets ---------------------===//
//
// Implements condensate-specialize: every decode attention gets the
// #condensate.spec its kernels are generated for.
//
//===----------------------------------------------------------------------===//
#include "condensate/Passes/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

namespace mlir::condensate {
#define GEN_PASS_DEF_CONDENSATESPECIALIZE
#include "condensate/Passes/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

int64_t mlir::condensate::chooseSparseSplits(Target target,
                                             int64_t virtualLength) {
  // On the CPU one chunk unless the list is long: float32 online softmax
  // over one 8K-long chunk drifts to 2e-5 of exact (as for dense, below),
  // and open certificate extras can reach the whole context.
  if (target == Target::cpu)
    return std::clamp<int64_t>((virtualLength + 1023) / 1024, 1, 16);
  // On a GPU each split is one thread block per (sequence, kv head), and a
  // launch runs as many of them as its batch needs to fill the chip (the
  // lowering's liveSplits: all of them only for a single sequence of
  // few kv heads): enough for splits of 32 condensate slots (two tiles of
  // the tensor-core body), up to 32 (the merge and the certificate walk
  // every split of the buffers, launched or not; a cap of 64 measured no
  // faster at batch 1 and 28/4/128 7% slower: docs/BENCHMARKS-HISTORY.md,
  // session 39).
  int64_t splits = (virtualLength + 31) / 32;
  return std::clamp<int64_t>(splits, 1, 32);
}

int64_t mlir::condensate::chooseDenseSplits(Target target, int64_t kvHeads) {
  // On the CPU 16 chunks keep float32 online softmax within 1e-5 of exact
  // at 8K tokens (one 8K-long chunk drifts to 2e-5).
  if (target == Target::cpu)
    return 16;
  // On a GPU a single sequence's kv heads get up to kGPUDenseBlockTarget
  // blocks however few they are: 64 splits for 8 kv heads, 256 for 2, 512
  // for 1. A launch runs fewer, one wave of the chip over all its
  // sequences and kv heads below 128 of them, 512 blocks from there (the
  // lowering's denseLiveSplits), and a context uses fewer still
  // (denseSplitRange: chunks of at least 128 tokens); the unused splits'
  // blocks exit at once and the merge stops at the last live split.
  int64_t heads = std::max<int64_t>(kvHeads, 1);
  return std::clamp<int64_t>((kGPUDenseBlockTarget + heads - 1) / heads, 64,
                             kGPUDenseBlockTarget);
}

namespace {

/// Resolves one named dimension from an operand's static size and a pass
/// option; reports conflicts and dimensions that stay dynamic.
FailureOr<int64_t> resolveDim(Operation *op, StringRef what,
                              StringRef option, int64_t fromType,
                              int64_t fromOption) {
  bool typeStatic = !ShapedType::isDynamic(fromType);
  if (typeStatic && fromOption > 0 && fromOption != fromType)
    return op->emitOpError()
           << "cannot specialise: " << option << "=" << fromOption
           << " conflicts with the operand type's " << what << " "
           << fromType;
  if (typeStatic)
    return fromType;
  if (fromOption > 0)
    return fromOption;
  return op->emitOpError() << "cannot specialise: " << what
                           << " is dynamic; give it with " << option << "=N";
}

struct SpecializePass
    : public mlir::condensate::impl::CondensateSpecializeBase<SpecializePass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<Target> tgt = symbolizeTarget(target);
    if (!tgt) {
      getOperation().emitError()
          << "condensate-specialize: unknown target '" << target
          << "'; expected cpu, sm_80 or sm_90";
      return signalPassFailure();
    }
    WalkResult result = getOperation().walk([&](DecodeAttentionOp op) {
      if (op.getSpecAttr())
        return WalkResult::advance();
      return failed(specialize(op, *tgt)) ? WalkResult::interrupt()
                                          : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult specialize(DecodeAttentionOp op, Target tgt) {
    auto qType = op.getQ().getType();
    auto kvType = op.getKCache().getType();
    FailureOr<int64_t> hq = resolveDim(op, "query head count", "q-heads",
                                       qType.getDimSize(1), qHeads);
    FailureOr<int64_t> d =
        resolveDim(op, "head_dim", "head-dim", qType.getDimSize(2), headDim);
    FailureOr<int64_t> hkv = resolveDim(op, "key/value head count",
                                        "kv-heads", kvType.getDimSize(1),
                                        kvHeads);
    FailureOr<int64_t> p = resolveDim(op, "page size", "page-size",
                                      kvType.getDimSize(2), pageSize);
    if (failed(hq) || failed(d) || failed(hkv) || failed(p))
      return failure();
    if (*hq % *hkv != 0)
      return op.emitOpError()
             << "cannot specialise: GQA ratio: " << *hq
             << " query heads is not a multiple of " << *hkv
             << " key/value heads";

    // Pin the shapes by casting operands with dynamic dimensions.
    OpBuilder b(op);
    int64_t dyn = ShapedType::kDynamic;
    auto castTo = [&](OpOperand &operand, ArrayRef<int64_t> shape) {
      auto type = llvm::cast<MemRefType>(operand.get().getType());
      auto target = MemRefType::get(shape, type.getElementType());
      if (type == target)
        return;
      operand.set(
          memref::CastOp::create(b, op.getLoc(), target, operand.get()));
    };
    castTo(op.getQMutable(), {dyn, *hq, *d});
    castTo(op.getKCacheMutable(), {dyn, *hkv, *p, *d});
    castTo(op.getVCacheMutable(), {dyn, *hkv, *p, *d});
    castTo(op.getOutMutable(), {dyn, *hq, *d});
    if (!op.getSummariesMutable().empty()) {
      // Rows: as given, or the summary slots and this layer's sketches.
      int64_t rows =
          cast<MemRefType>(op.getSummaries().getType()).getDimSize(2);
      if (ShapedType::isDynamic(rows)) {
        int64_t bits = 0;
        for (int64_t g = 0; g < *hkv; ++g)
          if (auto policy = dyn_cast<PolicyAttr>(op.getPolicyForHead(g));
              policy && policy.getSelector() == Selector::sketch)
            bits = policy.getSketchBits();
        rows = ::condensate::abi::summaryRows(*p, bits);
      }
      castTo(op.getSummariesMutable()[0], {dyn, *hkv, rows, *d});
    }
    if (!op.getStatsMutable().empty())
      castTo(op.getStatsMutable()[0], {dyn, *hq, kStatsWidth});

    // Budgets: the largest over the key/value heads.
    int64_t topUnits = 0, extraUnits = 0, virtualLength = 0;
    for (int64_t g = 0; g < *hkv; ++g) {
      auto policy = dyn_cast<PolicyAttr>(op.getPolicyForHead(g));
      if (!policy)
        continue;
      topUnits = std::max(topUnits, policy.getTopUnits());
      extraUnits = std::max(extraUnits, policy.getMaxExtra());
      virtualLength = std::max(
          virtualLength, policy.getAnchor() + policy.getWindowMax() +
                             policy.getTopUnits() * policy.getUnitTokens());
    }
    int64_t numSplits =
        splits > 0 ? splits : chooseSparseSplits(tgt, virtualLength);
    auto spec = SpecAttr::getChecked(
        [&] { return op.emitOpError(); }, op.getContext(), *d, *hq, *hkv, *p,
        kvType.getElementType(), topUnits, extraUnits, numSplits, tgt);
    if (!spec)
      return failure();
    op.setSpecAttr(spec);
    return op.verify();
  }
};

} // namespace
