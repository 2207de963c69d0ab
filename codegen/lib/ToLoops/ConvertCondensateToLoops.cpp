//===- ConvertCondensateToLoops.cpp - stages to scf loops -----------------===//
//
// Implements convert-condensate-to-loops: every condensate stage (and the KV
// append and prefill) becomes scf loops over memrefs with arith/math/vector arithmetic,
// which the standard lowering turns into LLVM for the CPU. Head-dimension
// rows are processed as vectors of kLanes floats. The stages' patterns live
// in the files beside this one, one per stage.
//
//===----------------------------------------------------------------------===//
#include "condensate/Codegen/Passes.h"

#include "Lowering.h"

#include "condensate/ABI/AttentionABI.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::condensate {
#define GEN_PASS_DEF_CONVERTCONDENSATETOLOOPS
#include "condensate/Codegen/Passes.h.inc"
} // namespace mlir::condensate

using namespace mlir;
using namespace mlir::condensate;

namespace {

class LoopsTargetInfo : public TargetInfo {
public:
  int64_t warpSize() const override { return 1; }
  int64_t vectorWidth(Type) const override { return loops::kLanes; }
  Value shuffleXor(Emitter &, Value v, int64_t) const override { return v; }
  void barrier(Emitter &) const override {}
  bool f64Exp() const override { return true; }
  FormulaOrder formulaOrder() const override { return FormulaOrder::Loops; }
};

struct ConvertCondensateToLoopsPass
    : public mlir::condensate::impl::ConvertCondensateToLoopsBase<
          ConvertCondensateToLoopsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (kvShare)
      loops::declareKVShare(getOperation());
    RewritePatternSet patterns(&getContext());
    populateCondensateToLoopsPatterns(patterns);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    WalkResult left = getOperation().walk([](Operation *op) {
      if (isStageOp(op)) {
        op->emitOpError() << "could not be lowered to loops";
        return WalkResult::interrupt();
      }
      if (isa<DecodeAttentionOp>(op)) {
        op->emitOpError() << "must be decomposed before lowering to loops "
                             "(run condensate-decompose)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted() ||
        failed(loops::checkAllocations(getOperation())))
      signalPassFailure();
  }
};

} // namespace

void mlir::condensate::loops::declareKVShare(ModuleOp module) {
  const char *name = ::condensate::abi::kCpuKVShareSymbol;
  // Decode stages read their share; the append and prefill do not.
  WalkResult decode = module.walk([](Operation *op) {
    return isStageOp(op) && !isa<AppendKVOp, PrefillAttentionOp>(op)
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (!decode.wasInterrupted())
    return;
  // A merge's kv heads are those of the attention that wrote its partials
  // (a layer whose kv heads have different policies is several such
  // problems over views, each numbering its own heads from 0).
  module.walk([](MergeOp m) {
    int64_t hkv = 0;
    for (Value partial : m.getPartials())
      for (Operation *user : partial.getUsers()) {
        if (auto a = dyn_cast<SparseAttendOp>(user))
          hkv = staticDim(a.getKCache(), 1);
        else if (auto a = dyn_cast<DenseAttendOp>(user))
          hkv = staticDim(a.getKCache(), 1);
      }
    if (hkv > 0)
      m->setAttr(kKVHeadsAttr,
                 IntegerAttr::get(IntegerType::get(m.getContext(), 64), hkv));
  });
  if (module.lookupSymbol(name))
    return;
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  auto i64 = b.getI64Type();
  auto fn = func::FuncOp::create(b, module.getLoc(), name,
                                 b.getFunctionType({i64}, {i64}));
  fn.setPrivate();
}

loops::KVShare loops::KVShare::of(Emitter &e, Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module || !module.lookupSymbol(::condensate::abi::kCpuKVShareSymbol))
    return {Value(), Value(), /*all=*/true};
  OpBuilder &b = e.builder();
  auto i64 = b.getI64Type();
  auto get = [&](int64_t which) {
    Value arg = arith::ConstantIntOp::create(b, e.location(), which, 64);
    Value v = func::CallOp::create(b, e.location(),
                                   ::condensate::abi::kCpuKVShareSymbol,
                                   TypeRange{i64}, ValueRange{arg})
                  .getResult(0);
    return e.toIndex(v);
  };
  return {get(0), get(1)};
}

const TargetInfo &mlir::condensate::loops::loopsTarget() {
  static const LoopsTargetInfo target;
  return target;
}

void mlir::condensate::populateCondensateToLoopsPatterns(
    RewritePatternSet &patterns) {
  populateScoreToLoopsPatterns(patterns);
  populateSelectToLoopsPatterns(patterns);
  populateAttendToLoopsPatterns(patterns);
  populateCertifyToLoopsPatterns(patterns);
  populateMergeToLoopsPatterns(patterns);
  populateAppendToLoopsPatterns(patterns);
  populatePrefillToLoopsPatterns(patterns);
}
