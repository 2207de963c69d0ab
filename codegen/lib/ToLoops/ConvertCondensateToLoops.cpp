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
  void runOnOperation() override {
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
